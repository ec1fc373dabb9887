"""The one way vq's human output makes a rich :class:`~rich.console.Console`.

Markup, emoji codes and highlighting are off: user text (job names, commands, paths,
reasons, error messages) prints exactly as it is. With markup on, a job named
``scan[red]`` printed as ``scan`` in red and ``[`` vanished from messages; with emoji codes
on, a name holding ``:smile:`` printed a face. Styles come from
:class:`rich.text.Text` objects and ``style=`` arguments, never from markup in strings.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["human_console"]


def human_console(*, soft_wrap: bool = False) -> Console:
    """A console printing strings literally (no markup, no emoji codes, no highlighting)."""
    return Console(highlight=False, markup=False, emoji=False, soft_wrap=soft_wrap)
