"""``vq admin``: root's verbs for the multi-user system root (docs/multi-user.md).

``vq admin user add USER`` provisions ``users/<uid>`` with the exact owners and modes of
:mod:`vq.services.system_tree`; ``vq admin import-tree OLD_ROOT --uid UID`` moves a
single-user tree there (:mod:`vq.services.import_tree`). Both need root and the policy
``[multi_user] enabled = true``; anything else is refused and changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from vq.cli.common import echo_json
from vq.config.multi_user import MultiUserSettings, multi_user_root, system_config_path
from vq.errors import ConfigError, PermissionDenied

__all__ = ["admin"]


def _policy_root() -> tuple[MultiUserSettings, Path]:
    """The enabled system policy and the system root; refused unless root and enabled."""
    from vq.config.settings import load_settings

    if os.geteuid() != 0:
        raise PermissionDenied(
            "vq admin changes the multi-user system root and must run as root",
            hint="run it with sudo",
        )
    policy = load_settings().multi_user
    if not policy.enabled:
        raise ConfigError(
            f"multi-user mode is not enabled in {system_config_path(os.environ)}",
            hint="set [multi_user] enabled = true and privilege_drop (docs/multi-user.md)",
        )
    return policy, multi_user_root(os.environ)


@click.group()
def admin() -> None:
    """Administer the multi-user system root (root only)."""


@admin.group()
def user() -> None:
    """Provision users of the multi-user system root."""


@user.command("add")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def user_add(name: str, as_json: bool) -> None:
    """Create (or repair) users/<uid> for the user NAME (a name or a numeric uid)."""
    from vq.services.system_tree import account, provision_user

    policy, root = _policy_root()
    who = account(int(name) if name.isdecimal() else name)
    path = provision_user(root, policy, who)
    if as_json:
        echo_json({"user": who.name, "uid": who.uid, "gid": who.gid, "tree": str(path)})
    else:
        click.echo(f"provisioned {path} for {who.name} (uid {who.uid}, gid {who.gid})")


@admin.command("import-tree")
@click.argument("old_root", type=click.Path(path_type=Path))
@click.option("--uid", "uid", type=click.IntRange(1), required=True, help="The tree's owner.")
@click.option("--json", "as_json", is_flag=True)
def import_tree_cmd(old_root: Path, uid: int, as_json: bool) -> None:
    """Move the single-user tree OLD_ROOT into users/UID (its daemon must be stopped)."""
    from vq.services.import_tree import import_tree
    from vq.services.system_tree import account

    policy, root = _policy_root()
    result = import_tree(old_root, root, policy, account(uid))
    if as_json:
        echo_json({"tree": str(result.tree), "moved": result.moved, "specs": result.specs})
    else:
        counts = ", ".join(f"{n} in {name}/" for name, n in sorted(result.moved.items()))
        click.echo(f"imported {old_root} into {result.tree}: {counts or 'nothing to move'}")
