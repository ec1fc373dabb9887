"""The shell check of a runtime generation on the cluster (pure): the lines a batch
script runs on the compute node before anything else, and the same check as a standalone
script a deployment runs on the lane's login host to verify what it shipped.

The check (:func:`generation_check_lines`): the generation directory exists and is not a
link, holds no link or special file, nothing in it is group or world writable, its entry
list (``entries.json``, whose SHA-256 is the digest) is intact, and every listed file and
nothing else is in the payload with its listed SHA-256. A failure calls ``vq_gen_fail
REASON``; the batch script's version writes an error receipt and exits 126.
"""

from __future__ import annotations

import shlex

__all__ = [
    "VERIFIED_LINE",
    "commit_check_lines",
    "generation_check_lines",
    "generation_verify_script",
]

#: What :func:`generation_verify_script` prints last when the generation verifies.
VERIFIED_LINE = "vq-generation-verified"


def _q(text: str) -> str:
    return shlex.quote(text)


def generation_check_lines(root: str, digest: str) -> list[str]:
    """Verify the bound runtime generation on the node before anything runs: it exists,
    holds no link or special file, nothing in it is group or world writable, its entry
    list (``entries.json``, the canonical bytes its digest is the SHA-256 of) is intact,
    and every listed file and nothing else is in the payload. Any failure: exit 126 with
    the reason on stderr and in the receipt, the command never started."""
    short = digest[:12]
    return [
        "",
        f"# the bound runtime generation {short}: verified here, on the node",
        f"vq_gen={_q(root.rstrip('/') + '/generations/' + digest)}",
        "vq_gen_fail() {",
        f"\tprintf 'vq: bound runtime generation {short} unavailable on this node: %s;"
        ' command not started\\n\' "$1" >&2',
        f'\tvq_error_receipt 126 not_run "bound runtime generation {short} unavailable: $1"',
        "\tvq_finish 126",
        "}",
        '[ -d "$vq_gen/payload" ] && [ ! -L "$vq_gen" ] || vq_gen_fail "it is not deployed"',
        '[ -z "$(find "$vq_gen" -type l -print 2>/dev/null | head -n 1)" ] '
        '|| vq_gen_fail "it holds a symbolic link"',
        '[ -z "$(find "$vq_gen" ! -type f ! -type d -print 2>/dev/null | head -n 1)" ] '
        '|| vq_gen_fail "it holds a special file"',
        '[ -z "$(find "$vq_gen" -perm /022 -print 2>/dev/null | head -n 1)" ] '
        '|| vq_gen_fail "its payload is group or world writable"',
        f'[ "$(sha256sum <"$vq_gen/entries.json" 2>/dev/null | cut -c1-64)" = {digest} ] '
        '|| vq_gen_fail "its entry list was altered"',
        "vq_gen_files=$(tr '{' '\\n' <\"$vq_gen/entries.json\" | sed -n "
        '\'s/^"path":"\\([^"]*\\)","sha256":"\\([0-9a-f]*\\)","size":[0-9]*,'
        '"type":"file"}.*/\\2  \\1/p\')',
        "vq_gen_listed=$(tr '{' '\\n' <\"$vq_gen/entries.json\" | grep -c '^\"path\"')",
        'vq_gen_found=$(cd "$vq_gen/payload" && find . -mindepth 1 | wc -l)',
        '[ "$vq_gen_listed" -eq "$vq_gen_found" ] || vq_gen_fail "its payload was altered"',
        '( cd "$vq_gen/payload" && printf \'%s\\n\' "$vq_gen_files" | sha256sum -c --status ) '
        '|| vq_gen_fail "its payload was altered"',
        'export VQ_RUNTIME_PAYLOAD="$vq_gen/payload"',
    ]


def commit_check_lines(git_dir: str, commit: str) -> list[str]:
    """Check on the node that the checkout ``git_dir`` is still at ``commit`` (a 7-64
    hex prefix), the enforced pin of a lane registry program: otherwise exit 126 with
    ``vq: runtime pin no longer holds: …`` on stderr and in the receipt, the command
    never started. Both values must already be checked (an absolute path; hex)."""
    return [
        "",
        "# the enforced runtime pin: the checkout must still be at the pinned commit",
        f"vq_pin_dir={_q(git_dir)}",
        'vq_pin_head=$(git -c safe.directory="$vq_pin_dir" -C "$vq_pin_dir" rev-parse '
        "--verify 'HEAD^{commit}' 2>/dev/null </dev/null) || vq_pin_head=unreadable",
        f'case "$vq_pin_head" in {commit.lower()}*) ;; *)',
        "\tprintf 'vq: runtime pin no longer holds: %s is at %s, not %s; command not started\\n' "
        f'"$vq_pin_dir" "$vq_pin_head" {commit.lower()} >&2',
        '\tvq_error_receipt 126 not_run "runtime pin no longer holds: the checkout moved"',
        "\tvq_finish 126",
        "esac",
    ]


def generation_verify_script(root: str, digest: str) -> str:
    """A standalone ``sh`` script verifying generation ``digest`` under ``root`` with the
    node's own check: it prints :data:`VERIFIED_LINE` and exits 0, or prints ``vq:
    bound runtime generation … unavailable on this node: REASON`` on stderr and exits
    126. ``root`` and ``digest`` must already be checked (an absolute path; 64 hex)."""
    lines = [
        "vq_error_receipt() { :; }",
        'vq_finish() { exit "$1"; }',
        *generation_check_lines(root, digest),
        f"echo {VERIFIED_LINE}",
    ]
    return "\n".join(lines) + "\n"
