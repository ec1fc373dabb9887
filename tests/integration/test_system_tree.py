"""The multi-user system root (§2.4, §7.1) with real OS users: provisioning by
``vq admin user add``, startup migration, and refusals of hostile trees naming the path.

Needs root and the accounts of ``scripts/testbed/users.sh`` (vqa, vqb, vqteam1)."""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat
from pathlib import Path

import pytest

from tests.conftest import Vq


def _have_accounts() -> bool:
    try:
        for name in ("vqa", "vqb", "vqteam1"):
            pwd.getpwnam(name)
        grp.getgrnam("vq-admins")
    except KeyError:
        return False
    return True


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not _have_accounts(),
    reason="needs root and the accounts of scripts/testbed/users.sh",
)

POLICY = '[multi_user]\nenabled = true\nprivilege_drop = "collector"\n'


@pytest.fixture
def system(vq: Vq, tmp_path: Path) -> tuple[Vq, Path]:
    config = Path(vq.env["VQ_CONFIG_DIR"])
    config.mkdir()
    (config / "config.toml").write_text(POLICY)
    root = tmp_path / "system"
    return Vq(vq.root, {**vq.env, "VQ_MULTI_USER_ROOT": str(root)}), root


def single_user_env(vq: Vq) -> dict[str, str]:
    """The environment of a single-user CLI on ``vq.root`` (no system policy applies)."""
    env = {k: v for k, v in vq.env.items() if k != "VQ_MULTI_USER_ROOT"}
    return {**env, "VQ_CONFIG_DIR": str(vq.root.parent / "single-user-config")}


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def assert_provisioned(root: Path, name: str) -> None:
    who = pwd.getpwnam(name)
    tree = root / "users" / str(who.pw_uid)
    assert owner_mode(tree) == (0, who.pw_gid, 0o750)
    for sub in ("queue", "jobs", "archive", "workdirs"):
        assert owner_mode(tree / sub) == (who.pw_uid, who.pw_gid, 0o750), sub


def test_user_add_provisions_exact_owners_and_modes(system: tuple[Vq, Path]) -> None:
    vq, root = system
    added = vq.run("admin", "user", "add", "vqa", "--json")
    uid = pwd.getpwnam("vqa").pw_uid
    assert f'"tree": "{root}/users/{uid}"' in added.stdout
    vq.run("admin", "user", "add", str(pwd.getpwnam("vqteam1").pw_uid))
    assert owner_mode(root) == (0, grp.getgrnam("vq-admins").gr_gid, 0o2775)
    assert owner_mode(root / "users") == (0, 0, 0o755)
    assert_provisioned(root, "vqa")
    assert_provisioned(root, "vqteam1")  # shares its primary group vq-team
    unknown = vq.run("admin", "user", "add", "no-such-user-here", check=False)
    assert unknown.returncode == 3 and "no user 'no-such-user-here'" in unknown.stderr


def test_user_add_needs_the_policy(vq: Vq, tmp_path: Path) -> None:
    env = {**vq.env, "VQ_MULTI_USER_ROOT": str(tmp_path / "system")}
    refused = Vq(vq.root, env).run("admin", "user", "add", "vqa", check=False)
    assert refused.returncode == 9 and "multi-user mode is not enabled" in refused.stderr
    assert "hint:" in refused.stderr and not (tmp_path / "system").exists()


def test_startup_migrates_a_numeric_tree(system: tuple[Vq, Path]) -> None:
    vq, root = system
    uid = pwd.getpwnam("vqb").pw_uid
    (root / "users" / str(uid) / "queue").mkdir(parents=True)
    for path in (
        root,
        root / "users",
        root / "users" / str(uid),
        root / "users" / str(uid) / "queue",
    ):
        path.chmod(0o777)
    vq.run("daemon", "start", timeout=60)  # migrates, then serves (stopped by the fixture)
    assert_provisioned(root, "vqb")
    assert owner_mode(root)[2] == 0o2775 and owner_mode(root / "users") == (0, 0, 0o755)


@pytest.mark.parametrize(
    "plant, why",
    [
        (lambda users, uid: (users / "alice").mkdir(), "is not a canonical decimal uid"),
        (lambda users, uid: (users / f"0{uid}").mkdir(), "is not a canonical decimal uid"),
        (lambda users, uid: (users / str(uid)).symlink_to("/tmp"), "is a symlink"),
        (lambda users, uid: (users / str(uid)).write_text(""), "is not a directory"),
        (lambda users, uid: (users / "4000000").mkdir(), "no user has uid 4000000"),
        (lambda users, uid: (users / "2").mkdir(), "below multi_user.min_uid = 1000"),
        (
            lambda users, uid: [
                (users / str(uid)).mkdir(),
                (users / str(uid) / "queue").symlink_to("/root"),
            ],
            "is not a real directory",
        ),
    ],
    ids=["name", "leading-zero", "symlink", "file", "unknown-uid", "low-uid", "inner-symlink"],
)
def test_startup_refuses_a_hostile_tree_naming_it(
    system: tuple[Vq, Path], plant: object, why: str
) -> None:
    vq, root = system
    users = root / "users"
    users.mkdir(parents=True)
    uid = pwd.getpwnam("vqa").pw_uid
    plant(users, uid)  # type: ignore[operator]
    before = sorted((p.name, owner_mode(p)) for p in users.iterdir())
    refused = vq.run("daemon", "start", check=False, timeout=60)
    assert refused.returncode == 9, refused.stderr
    assert refused.stderr.startswith(f"vq: error: {users}/"), refused.stderr
    assert why in refused.stderr and "hint:" in refused.stderr
    assert sorted((p.name, owner_mode(p)) for p in users.iterdir()) == before
    assert not (vq.root / "daemon.pid").exists() and not (root / "daemon.pid").exists()
    assert Path("/tmp").stat().st_mode & 0o7777 == 0o1777  # the symlink target is untouched


def test_import_tree_moves_a_stopped_single_user_tree(system: tuple[Vq, Path]) -> None:
    vq, root = system
    old = Vq(vq.root, single_user_env(vq))
    job = old.submit("--", "true")  # no daemon: the PENDING spec is written by submit
    who = pwd.getpwnam("vqa")
    imported = vq.run("admin", "import-tree", str(vq.root), "--uid", str(who.pw_uid), "--json")
    assert '"specs": 1' in imported.stdout, imported.stdout
    tree = root / "users" / str(who.pw_uid)
    spec = tree / "queue" / f"{job}.json"
    data = json.loads(spec.read_text())
    assert data["submitter"] == str(who.pw_uid) and data["id"] == job
    assert str(vq.root) not in json.dumps({k: data.get(k) for k in ("workdir", "cwd")})
    for path in (spec, tree / "jobs" / job):
        assert path.stat().st_uid == who.pw_uid and path.stat().st_gid == who.pw_gid
    assert not (vq.root / "queue" / f"{job}.json").exists()
    assert_provisioned(root, "vqa")
    # the same id again: refused before anything moves
    again = old.submit("--", "true")
    (vq.root / "queue" / f"{job}.json").write_text("{}")
    refused = vq.run("admin", "import-tree", str(vq.root), "--uid", str(who.pw_uid), check=False)
    assert refused.returncode == 6 and f"{spec} already exists" in refused.stderr
    assert (vq.root / "queue" / f"{again}.json").exists()


def test_import_tree_refuses_a_planted_spec_before_anything_moves(
    system: tuple[Vq, Path], tmp_path: Path
) -> None:
    """A FIFO and a link among the old queue's specs: exit 7 naming the file, within the
    deadline (never waited on); nothing moved, the planted entries left as they were."""
    vq, root = system
    old = Vq(vq.root, single_user_env(vq))
    job = old.submit("--", "true")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text((vq.root / "queue" / f"{job}.json").read_text())
    os.mkfifo(vq.root / "queue" / "0123456789ab.json", 0o600)
    uid = str(pwd.getpwnam("vqa").pw_uid)
    refused = vq.run("admin", "import-tree", str(vq.root), "--uid", uid, check=False, timeout=30)
    assert refused.returncode == 7 and "0123456789ab.json" in refused.stderr, refused.stderr
    assert refused.stderr.startswith("vq: error: ") and "hint: " in refused.stderr
    assert stat.S_ISFIFO((vq.root / "queue" / "0123456789ab.json").lstat().st_mode)
    (vq.root / "queue" / "0123456789ab.json").unlink()
    (vq.root / "queue" / "fedcba987654.json").symlink_to(elsewhere)
    refused = vq.run("admin", "import-tree", str(vq.root), "--uid", uid, check=False, timeout=30)
    assert refused.returncode == 7 and "fedcba987654.json" in refused.stderr, refused.stderr
    assert (vq.root / "queue" / "fedcba987654.json").is_symlink()
    assert (vq.root / "queue" / f"{job}.json").is_file()
    assert not any((root / "users" / uid / "queue").iterdir())


def test_import_tree_refuses_while_the_old_daemon_runs(system: tuple[Vq, Path]) -> None:
    vq, _ = system
    old_env = single_user_env(vq)
    old_env["VQ_CONFIG_DIR"] = str(vq.root.parent / "single-config")
    old = Vq(vq.root, old_env)
    old.start_daemon("--allow-root")
    try:
        uid = str(pwd.getpwnam("vqa").pw_uid)
        refused = vq.run("admin", "import-tree", str(vq.root), "--uid", uid, check=False)
        assert refused.returncode == 6 and "a vq daemon still runs" in refused.stderr
    finally:
        old.stop_daemon()
