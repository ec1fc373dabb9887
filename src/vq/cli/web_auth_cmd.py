"""Credential verbs of ``vq web``: the admin token, console accounts, agent tokens.

* ``vq web init-token [--force] [--json]`` — create the admin bearer token; printed once.
* ``vq web user add USER --role viewer|operator|admin [--force] [--password-stdin]``,
  ``vq web user remove USER``, ``vq web user list [--json]``.
* ``vq web token create NAME --scope read,submit[,control] [--profiles a,b]
  [--programs x] [--max-jobs-per-day N] [--expires 30d] [--json]`` — printed once;
  ``vq web token list [--json]`` (never secrets); ``vq web token revoke NAME|ID``.

Secrets go to stdout exactly once (so ``TOKEN=$(vq web ... )`` works); notes go to
stderr. Errors are :mod:`vq.errors` classes: Conflict 6 (exists; use --force),
NotFound 3, InvalidInput 4, ConfigError 9 (a credential file with unsafe permissions).
The web modules are imported inside the commands (no FastAPI on this path).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from vq.cli.output import echo_json
from vq.cli.types import AsciiIntRange

TYPE_CHECKING = False
if TYPE_CHECKING:  # the web package is imported only by the commands that use it
    from vq.web.auth.scoped import TokenView

    class TokenRow(TokenView):
        """A token of ``vq web token list``: its view and the jobs it submitted today."""

        used_today: int


__all__ = ["register"]


def _root() -> Path:
    from vq.paths import resolve_config_root

    return resolve_config_root()


def _note(text: str) -> None:
    click.echo(text, err=True)


def _split(values: tuple[str, ...]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


@click.command("init-token")
@click.option(
    "--force", is_flag=True, help="Replace an existing token (the old one stops working)."
)
@click.option("--json", "as_json", is_flag=True, help='Print {"token": ...}.')
def init_token(force: bool, as_json: bool) -> None:
    """Create the admin bearer token of the web console and print it once."""
    from vq.web.auth.tokens import init_token as create

    token = create(_root(), force=force)
    if as_json:
        echo_json({"token": token, "replaced": force})
        return
    click.echo(token)
    _note("vq: this admin token is shown only now; send it as 'Authorization: Bearer <token>'")


@click.group()
def user() -> None:
    """Console accounts (roles viewer, operator, admin)."""


def _read_password(from_stdin: bool) -> str:
    if from_stdin or not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n").rstrip("\r")
    password: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return password


@user.command("add")
@click.argument("username")
@click.option(
    "--role", required=True, type=click.Choice(["viewer", "operator", "admin"]), help="Its role."
)
@click.option("--force", is_flag=True, help="Replace an existing account's password and role.")
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin."
)
def user_add(username: str, role: str, force: bool, password_stdin: bool) -> None:
    """Add a console account (the password is prompted for, or read from stdin)."""
    from vq.errors import Conflict
    from vq.web.auth.accounts import add_account, current_role, validate_username

    root = _root()
    validate_username(username)
    if not force and current_role(root, username) is not None:  # before asking for a password
        raise Conflict(
            f"console account {username!r} already exists",
            hint="pass --force to replace its password and role",
        )
    account = add_account(root, username, role, _read_password(password_stdin), force=force)
    _note(f"vq: console account {account.username!r} ({account.role}) saved")


@user.command("remove")
@click.argument("username")
def user_remove(username: str) -> None:
    """Remove a console account (its sessions end on their next request)."""
    from vq.web.auth.accounts import remove_account

    remove_account(_root(), username)
    _note(f"vq: console account {username!r} removed")


@user.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print [{username, role, created_at}].")
def user_list(as_json: bool) -> None:
    """List console accounts."""
    from vq.web.auth.accounts import list_accounts

    accounts = list_accounts(_root())
    if as_json:
        echo_json([account.public() for account in accounts])
        return
    if not accounts:
        click.echo("no console accounts (reads are open; add one with `vq web user add`)")
        return
    width = max(8, *(len(a.username) for a in accounts))
    click.echo(f"{'USER':<{width}}  {'ROLE':<8}  CREATED")
    for account in accounts:
        click.echo(f"{account.username:<{width}}  {account.role:<8}  {account.created_at}")


@click.group()
def token() -> None:
    """Scoped agent tokens (limited scopes, profiles, programs, daily quotas)."""


@token.command("create")
@click.argument("name")
@click.option("--scope", "scopes", required=True, multiple=True, help="read,submit,control")
@click.option("--profiles", multiple=True, help="Only these profiles (comma-separated).")
@click.option("--programs", multiple=True, help="Only these programs (comma-separated).")
@click.option("--max-jobs-per-day", type=AsciiIntRange(min=1), help="Daily quota (UTC days).")
@click.option(
    "--max-upload-bytes-per-day",
    type=AsciiIntRange(min=1),
    help="Daily quota of upload bytes (UTC days).",
)
@click.option("--expires", help="Lifetime, e.g. 30d or 12h (default: never).")
@click.option("--json", "as_json", is_flag=True, help="Print the token and its record.")
def token_create(
    name: str,
    scopes: tuple[str, ...],
    profiles: tuple[str, ...],
    programs: tuple[str, ...],
    max_jobs_per_day: int | None,
    max_upload_bytes_per_day: int | None,
    expires: str | None,
    as_json: bool,
) -> None:
    """Create an agent token and print it once."""
    from vq.domain.durations import parse_duration
    from vq.web.auth.scoped import create_token

    now = datetime.now(UTC)
    lifetime = timedelta(seconds=parse_duration(expires)) if expires is not None else None
    secret, record = create_token(
        _root(),
        name,
        _split(scopes),
        now=now,
        profiles=_split(profiles),
        programs=_split(programs),
        max_jobs_per_day=max_jobs_per_day,
        expires_in=lifetime,
        max_upload_bytes_per_day=max_upload_bytes_per_day,
    )
    if as_json:
        echo_json({"token": secret, **record.public(now)})
        return
    click.echo(secret)
    _note(
        f"vq: agent token {record.name!r} (id {record.id}, scopes {','.join(record.scopes)}) "
        "is shown only now"
    )


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the records (never the secrets).")
def token_list(as_json: bool) -> None:
    """List agent tokens with their limits and today's use."""
    from vq.web.auth.quota import usage_today
    from vq.web.auth.scoped import list_tokens

    root, now = _root(), datetime.now(UTC)
    rows: list[TokenRow] = [
        {**t.public(now), "used_today": usage_today(root, t.id, now)} for t in list_tokens(root)
    ]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no agent tokens (create one with `vq web token create`)")
        return
    width = max(4, *(len(r["name"]) for r in rows))
    click.echo(
        f"{'NAME':<{width}}  {'ID':<12}  {'STATE':<8}  {'SCOPES':<20}  {'TODAY':<9}  EXPIRES"
    )
    for r in rows:
        quota = f"{r['used_today']}/{r['max_jobs_per_day'] or '-'}"
        scopes = ",".join(r["scopes"])
        named = (("profiles", r["profiles"]), ("programs", r["programs"]))
        limits = "".join(f" {key}={','.join(values)}" for key, values in named if values)
        click.echo(
            f"{r['name']:<{width}}  {r['id']:<12}  {r['state']:<8}  {scopes:<20}  {quota:<9}  "
            f"{r['expires_at'] or 'never'}{limits}"
        )


@token.command("revoke")
@click.argument("name_or_id")
def token_revoke(name_or_id: str) -> None:
    """Revoke an agent token by name or id (at once, for good)."""
    from vq.web.auth.scoped import revoke_token

    record, already = revoke_token(_root(), name_or_id, now=datetime.now(UTC))
    state = "was already revoked" if already else "revoked"
    _note(f"vq: agent token {record.name!r} (id {record.id}) {state}")


def register(group: click.Group) -> None:
    """Add the credential verbs to the ``vq web`` group."""
    group.add_command(init_token)
    group.add_command(user)
    group.add_command(token)
