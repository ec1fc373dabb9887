"""One refusal of a campaign file, naming the node and the field it concerns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

__all__ = ["Problem", "field_path"]


class ProblemJSON(TypedDict):
    """A :class:`Problem` in a ``--json`` answer."""

    node: str | None
    field: str
    message: str


@dataclass(frozen=True)
class Problem:
    """Why a campaign is refused. ``node`` is None for a campaign-level field."""

    node: str | None
    field: str
    message: str

    def text(self) -> str:
        where = f"node {self.node!r}: {self.field}" if self.node else self.field
        return f"{where}: {self.message}"

    def as_dict(self) -> ProblemJSON:
        return {"node": self.node, "field": self.field, "message": self.message}


def field_path(parts: tuple[int | str, ...] | list[int | str]) -> str:
    """``("inputs", 0, "source")`` → ``inputs[0].source``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(file)"
