"""``vq publish DEST --from DIR [--json]``: copy a directory and publish it atomically.

The copy is built in a hidden stage beside DEST, synced, then committed with a no-replace
rename (:mod:`vq.publish`). DEST is absent or complete; an existing DEST is refused (exit 6)
and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import click

from vq.cli.output import echo_json
from vq.errors import InvalidInput, NotFound

__all__ = ["publish"]


@click.command()
@click.argument("dest", type=click.Path(path_type=Path))
@click.option(
    "--from",
    "source",
    required=True,
    type=click.Path(path_type=Path),
    help="The directory to copy (symlinks are copied as symlinks).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the publication as JSON.")
def publish(dest: Path, source: Path, as_json: bool) -> None:
    """Publish a copy of DIR at DEST: DEST ends absent or complete, never partial."""
    from vq.publish import Draft, copy_tree
    from vq.publish import publish as publish_tree

    try:
        present = source.exists()
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise InvalidInput(
            f"--from cannot be looked up: {exc.strerror}", hint="--from takes a directory"
        ) from exc
    if not present:
        raise NotFound(f"{source} does not exist", hint="give an existing directory to --from")
    if source.is_symlink() or not source.is_dir():
        raise InvalidInput(f"{source} is not a directory", hint="--from takes a directory")
    origin, target = source.resolve(), dest.absolute().parent.resolve() / dest.name
    if target == origin or target.is_relative_to(origin):
        raise InvalidInput(
            f"{dest} is inside {source}: the copy would contain itself",
            hint="publish to a path outside the directory given to --from",
        )
    counted = {"files": 0}

    def copy(draft: Draft) -> None:
        counted["files"] = copy_tree(source, draft.path)

    done = publish_tree(dest, copy)
    if as_json:
        echo_json({"path": str(done.path), "files": counted["files"], "cleanup_pending": False})
        return
    click.echo(f"published {done.path} ({counted['files']} files)")
