"""The ``[programs.NAME]`` entries of the settings (§3.4): the program registry's three
kinds (binary, venv, import), each with the form its probe needs, and the rule for a
program's name. Part of :class:`vq.config.settings.Settings`; :mod:`vq.services.programs` probes
them."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "BinaryProgram",
    "ImportProgram",
    "ProgramSettings",
    "VenvProgram",
    "check_program_names",
]

# pydantic patterns search: anchor them.
_MODULE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_SHA = r"^[0-9a-fA-F]{7,64}$"
_PROGRAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def _command_path(value: str) -> str:
    """An absolute path, or a bare name looked up on PATH when probed."""
    if not value or ("/" in value and not value.startswith("/")) or "\x00" in value:
        raise ValueError("must be an absolute path or a bare name found on PATH")
    return value


class _Program(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)


class BinaryProgram(_Program):
    """``kind = "binary"``: an executable (``path``); probe: exists and is executable."""

    kind: Literal["binary"]
    path: str

    _path = field_validator("path")(_command_path)


class VenvProgram(_Program):
    """``kind = "venv"``: an interpreter plus a git checkout, with optional pins (§3.4)."""

    kind: Literal["venv"]
    python: str
    git_dir: str
    branch: str | None = Field(default=None, min_length=1)
    import_check: str | None = Field(default=None, pattern=_MODULE)
    expected_git_sha: str | None = Field(default=None, pattern=_SHA)
    expected_import_version: str | None = Field(default=None, min_length=1)

    _python = field_validator("python")(_command_path)

    @field_validator("git_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path")
        return value


class ImportProgram(_Program):
    """``kind = "import"``: ``module`` importable by ``python``, with ``symbols``."""

    kind: Literal["import"]
    python: str
    module: str = Field(pattern=_MODULE)
    symbols: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list
    )

    _python = field_validator("python")(_command_path)


#: ``[programs.NAME]``: one of the three kinds, chosen by its ``kind`` key.
ProgramSettings = Annotated[
    BinaryProgram | VenvProgram | ImportProgram, Field(discriminator="kind")
]


def check_program_names(value: dict[str, object]) -> dict[str, object]:
    """Refuse a ``[programs.NAME]`` whose name is not 1-64 of letters, digits, ``._+-``."""
    for name in value:
        if not _PROGRAM_NAME.fullmatch(name):
            raise ValueError(f"program name {name!r} must be 1-64 of letters, digits, ._+-")
    return value
