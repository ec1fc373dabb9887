"""A deployment root's generations directory is trusted only as a real, private
directory: a link to generations elsewhere, or a root or generations directory others
may write, refuses every generation under it (a real deploy on a real filesystem)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from vq.errors import InvalidInput
from vq.services.runtime_generations import deploy, generation_problem


@pytest.fixture
def deployed() -> Iterator[tuple[Path, str]]:
    with tempfile.TemporaryDirectory(prefix="vq-gen-checks-") as name:
        base = Path(name)
        source = base / "src"
        source.mkdir()
        (source / "tool").write_text("#!/bin/sh\n")
        root = base / "deploy"
        digest = str(deploy(source, root, datetime.now(UTC).isoformat())["digest"])
        yield root, digest


def test_a_deployed_generation_verifies(deployed: tuple[Path, str]) -> None:
    root, digest = deployed
    assert generation_problem(root, digest) is None


def test_generations_linked_elsewhere_are_refused(deployed: tuple[Path, str]) -> None:
    root, digest = deployed
    elsewhere = root.parent / "elsewhere"
    shutil.move(root / "generations", elsewhere)
    (root / "generations").symlink_to(elsewhere)
    problem = generation_problem(root, digest)
    assert problem == f"{root / 'generations'} is a symbolic link"


@pytest.mark.parametrize("which", ["root", "generations"])
def test_a_directory_others_may_write_is_refused(deployed: tuple[Path, str], which: str) -> None:
    root, digest = deployed
    target = root if which == "root" else root / "generations"
    target.chmod(0o777)
    problem = generation_problem(root, digest)
    assert problem is not None and problem.endswith("is group or world writable"), problem
    assert str(target) in problem


def test_a_root_reached_through_a_link_is_the_administrators_layout(
    deployed: tuple[Path, str],
) -> None:
    root, digest = deployed
    alias = root.parent / "alias"
    alias.symlink_to(root)
    assert generation_problem(alias, digest) is None


def test_deploy_refuses_a_root_others_may_write_before_building(
    deployed: tuple[Path, str],
) -> None:
    root, _ = deployed
    root.chmod(0o775)
    before = sorted(p.name for p in (root / "generations").iterdir())
    with pytest.raises(InvalidInput) as refused:
        deploy(root.parent / "src", root, datetime.now(UTC).isoformat())
    assert "is group or world writable" in refused.value.message
    assert "chmod go-w" in (refused.value.hint or "")
    assert sorted(p.name for p in (root / "generations").iterdir()) == before
