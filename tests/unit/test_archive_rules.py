"""The pure rules deciding which source entries may enter a job workspace."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vq.domain.archive_rules import Member, MemberKind, check_member, check_members
from vq.errors import InvalidInput, UnsafeArchive

F, D, S, H = MemberKind.FILE, MemberKind.DIR, MemberKind.SYMLINK, MemberKind.HARDLINK


@pytest.mark.parametrize(
    ("name", "kind", "target", "expected"),
    [
        ("a", F, None, "a"),
        ("./a/b", F, None, "a/b"),
        ("a//b/./c", F, None, "a/b/c"),
        ("a/", D, None, "a"),
        ("a/.", D, None, "a"),
        (".", D, None, "."),
        ("./", D, None, "."),
        ("c d/é.txt", F, None, "c d/é.txt"),
        ("a..b/..c", F, None, "a..b/..c"),
        ("_vqx", F, None, "_vqx"),
        ("sub/_vq", F, None, "sub/_vq"),
        ("ab:c", F, None, "ab:c"),
        ("link", S, "sub/x", "link"),
        ("l", S, ".", "l"),
        ("sub/link", S, "../x", "sub/link"),
        ("sub/link", S, "..", "sub/link"),
        ("a/b/link", S, "../../c/./d", "a/b/link"),
        ("h", H, "a/b", "h"),
        ("h", H, "./a", "h"),
    ],
)
def test_accepted(name: str, kind: MemberKind, target: str | None, expected: str) -> None:
    assert check_member(name, kind, target) == expected


@pytest.mark.parametrize(
    ("name", "kind", "target", "reason"),
    [
        ("", F, None, "empty"),
        ("a\0b", F, None, "NUL"),
        ("/abs/evil", F, None, "absolute"),
        ("//abs", D, None, "absolute"),
        ("\\abs", F, None, "absolute"),
        ("C:/x", F, None, "absolute"),
        ("c:x", F, None, "absolute"),
        ("../evil", F, None, "'..'"),
        ("..", D, None, "'..'"),
        ("a/../b", F, None, "'..'"),
        ("a/..", D, None, "'..'"),
        ("dev", MemberKind.DEVICE, None, "device files and FIFOs are not allowed"),
        ("fifo", MemberKind.FIFO, None, "device files and FIFOs are not allowed"),
        ("sock", MemberKind.OTHER, None, "not allowed"),
        (".", F, None, "root"),
        ("./", S, "x", "root"),
        ("a/", F, None, "ends like a directory"),
        ("a/.", S, "b", "ends like a directory"),
        ("./a/.", H, "b", "ends like a directory"),
        ("_vq", D, None, "reserved for vq metadata"),
        ("_vq/x", F, None, "reserved for vq metadata"),
        ("./_vq/events.jsonl", F, None, "reserved for vq metadata"),
        ("link", S, "/etc/passwd", "absolute link target"),
        ("link", S, "C:\\x", "absolute link target"),
        ("link", S, "..", "outside the workspace"),
        ("link", S, "../x", "outside the workspace"),
        ("sub/link", S, "../../outside", "outside the workspace"),
        ("sub/link", S, "d/../x", "after a name"),
        ("link", S, "a/..", "after a name"),
        ("link", S, None, "without a target"),
        ("link", S, "", "empty link target"),
        ("link", S, "a\0", "NUL"),
        ("h", H, "../x", "'..'"),
        ("h", H, "/etc/passwd", "absolute"),
        ("h", H, None, "does not name a file"),
        ("h", H, ".", "does not name a file"),
    ],
)
def test_refused(name: str, kind: MemberKind, target: str | None, reason: str) -> None:
    with pytest.raises(UnsafeArchive) as info:
        check_member(name, kind, target)
    assert repr(name) in info.value.message
    assert reason in info.value.message
    assert info.value.hint
    assert isinstance(info.value, InvalidInput)
    assert info.value.reference == "unsafe-archive"


def test_reserved_name_hint_says_rename() -> None:
    with pytest.raises(UnsafeArchive) as info:
        check_member("_vq", F)
    assert "rename" in (info.value.hint or "")


# --- whole-source rules -----------------------------------------------------------------
def test_check_members_returns_normalized_names_in_order() -> None:
    members = [Member("./", D), Member("./a/", D), Member("./a/f", F), Member("h", H, "a/f")]
    assert check_members(members) == [".", "a", "a/f", "h"]


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ([Member("a", F), Member("./a", F)], "more than once"),
        ([Member("a", D), Member("a", F)], "more than once"),
        ([Member("a", S, "b"), Member("a", F)], "more than once"),
        ([Member("d", S, "."), Member("d/x", F)], "not a directory"),
        ([Member("d/x", F), Member("d", S, "sub")], "not a directory"),
        ([Member("f", F), Member("f/x", F)], "not a directory"),
        ([Member("h", H, "f"), Member("f", F)], "not an earlier file"),
        ([Member("h", H, "missing")], "not an earlier file"),
        ([Member("l", S, "f"), Member("h", H, "l")], "not an earlier file"),
        ([Member("d", D), Member("h", H, "d")], "not an earlier file"),
    ],
)
def test_check_members_refuses(members: list[Member], reason: str) -> None:
    with pytest.raises(UnsafeArchive, match=reason):
        check_members(members)


def test_repeated_directories_are_fine() -> None:
    assert check_members([Member("d", D), Member("d/", D), Member(".", D), Member("./", D)]) == [
        "d",
        "d",
        ".",
        ".",
    ]


# --- properties -------------------------------------------------------------------------
SEGMENTS = ["a", "b", ".", "..", "", "_vq", "/", "c d", "é"]
paths = st.lists(st.sampled_from(SEGMENTS), max_size=8).map("/".join)
kinds = st.sampled_from(list(MemberKind))


def _inside_root(relative: str) -> bool:
    resolved = posixpath.normpath(posixpath.join("/root", relative))
    return resolved == "/root" or resolved.startswith("/root/")


@given(name=paths, kind=kinds)
def test_accepted_names_stay_inside(name: str, kind: MemberKind) -> None:
    try:
        result = check_member(name, kind, "a")
    except UnsafeArchive:
        return
    assert not result.startswith("/")
    assert ".." not in result.split("/")
    assert _inside_root(result)
    assert result.split("/")[0] != "_vq"
    assert kind not in (MemberKind.DEVICE, MemberKind.FIFO, MemberKind.OTHER)


@given(name=paths, target=paths)
def test_accepted_symlinks_point_inside(name: str, target: str) -> None:
    try:
        result = check_member(name, MemberKind.SYMLINK, target)
    except UnsafeArchive:
        return
    assert not target.startswith("/")
    assert _inside_root(posixpath.join(posixpath.dirname(result), target))


@given(name=paths, target=paths)
def test_accepted_hardlinks_point_inside(name: str, target: str) -> None:
    try:
        check_member(name, MemberKind.HARDLINK, target)
    except UnsafeArchive:
        return
    assert ".." not in target.split("/")
    assert _inside_root(target)
