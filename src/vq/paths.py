"""State-root and config-root resolution, and the §2.4 filesystem layout as path arithmetic.

Nothing here touches the disk except :meth:`StatePaths.ensure`, which creates the tree.

State root: ``VQ_STATE_DIR`` → ``$XDG_DATA_HOME/vq`` → ``~/.local/share/vq``.
Config root: ``VQ_CONFIG_DIR`` → ``$XDG_CONFIG_HOME/vq`` → ``~/.config/vq``.

Every file and directory of a state root is named here, and only here: other modules
ask a :class:`StateLayout` for a path instead of joining a file name onto the root (a
test in ``tests/architecture`` enforces it).

Layout (single user)::

    <state-root>/
      queue/<jobid>.json            authoritative JobSpec
      queue/<jobid>.json.lock       advisory writer lock
      queue/.vq-daemon.lock         one-daemon lock
      jobs/<jobid>/                 workspace: stdout.log, stderr.log, _vq/…, payload
      workdirs/<jobid>/             VQ_WORKDIR scratch
      archive/                      cleanup archives (VQ_ARCHIVE_DIR moves it)
      packs/<name>/pack.json        a packed sweep's roster and attempts (0600)
      lane-packs/<lane>/<alloc>.json  a packed array allocation's intent (before sbatch)
      idempotency/<hash>.json       idempotency-key claims (and their .lock files)
      uploads/                      the web API's staged uploads
      hosts/<name>.json             what is known about each configured remote host
      runtime-deployments/<lane>/<program>.json  a lane's last verified runtime deployment
      outbox/                       messages waiting to be delivered (e.g. webhooks)
      outbox-fetch/                 scratch snapshots streamed to a remote vq fetch
      daemon.pid  daemon.log  daemon.sock  web.log
      drain.json  throttle.json  daemon_capacity.json
      rpc-audit.jsonl  fleet-audit.jsonl
      campaigns.json                the registered campaign run directories
                                    (multi-user: users/<uid>/campaigns/campaigns.json)

Multi-user (§2.4): the per-owner trees (queue, jobs, workdirs, archive, idempotency,
campaigns) move to ``users/<uid>/`` while the daemon-wide files stay at the system root;
:meth:`StateLayout.for_owner` gives that owner's layout.
"""

from __future__ import annotations

import builtins
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from vq.config import multi_user_root, roots

__all__ = [
    "MultiUserLayout",
    "OwnerMap",
    "StateLayout",
    "StatePaths",
    "client_layout",
    "resolve_config_root",
    "resolve_state_root",
]

SPEC_SUFFIX = ".json"


def resolve_state_root(env: Mapping[str, str] | None = None) -> Path:
    """The state root for this environment (not created)."""
    return Path(roots.state_root(os.environ if env is None else env))


def resolve_config_root(env: Mapping[str, str] | None = None) -> Path:
    """The config root for this environment (not created)."""
    return Path(roots.config_root(os.environ if env is None else env))


@dataclass(frozen=True)
class StateLayout:
    """Every path of one state root. Pure arithmetic; job ids must already be validated.

    ``owner_dir`` (multi-user: ``<root>/users/<uid>``) holds the per-owner trees; None
    means they live at the root itself (single user). Daemon-wide files are always at
    the root.
    """

    root: Path
    archive_override: Path | None = None
    owner_dir: Path | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> StateLayout:
        env = os.environ if env is None else env
        archive = env.get("VQ_ARCHIVE_DIR")
        return cls(
            resolve_state_root(env), Path(archive).expanduser().absolute() if archive else None
        )

    def for_owner(self, uid: int) -> StateLayout:
        """The layout of one owner's trees under ``users/<uid>/`` (multi-user mode)."""
        return StateLayout(self.root, self.archive_override, self.users_dir / str(uid))

    # --- per-owner trees -----------------------------------------------------------------
    @property
    def owner_root(self) -> Path:
        """Where the per-owner trees live: ``users/<uid>`` or the root itself."""
        return self.owner_dir or self.root

    @cached_property
    def queue_dir(self) -> Path:
        return self.owner_root / "queue"

    @cached_property
    def jobs_dir(self) -> Path:
        return self.owner_root / "jobs"

    @property
    def terminal_index(self) -> Path:
        """The daemon's cache of finished jobs' summaries (``vq.store.summaries``)."""
        return self.owner_root / "terminal-index.jsonl"

    @property
    def fetches_dir(self) -> Path:
        """``fetches/``: one record per ``vq fetch`` in progress, naming its DEST, so a
        fetch killed while staging next to DEST is found (``vq doctor``) and swept."""
        return self.owner_root / "fetches"

    @cached_property
    def workdirs_dir(self) -> Path:
        return self.owner_root / "workdirs"

    @cached_property
    def packs_dir(self) -> Path:
        return self.root / "packs"

    def pack_file(self, name: str) -> Path:
        """``packs/<name>/pack.json``; ``name`` must already be validated."""
        return self.packs_dir / name / "pack.json"

    def lane_pack_intent(self, lane: str, allocation_id: str) -> Path:
        """``lane-packs/<lane>/<alloc>.json``: the intent of one packed array allocation
        of scheduler lane ``lane`` (both already validated)."""
        return self.root / "lane-packs" / lane / f"{allocation_id}.json"

    @property
    def archive_dir(self) -> Path:
        return self.archive_override or self.owner_root / "archive"

    @property
    def idempotency_dir(self) -> Path:
        """Idempotency-key claims: ``<hash>.json`` and ``<hash>.lock``."""
        return self.owner_root / "idempotency"

    def idempotency_claim(self, key_hash: str) -> Path:
        return self.idempotency_dir / f"{key_hash}.json"

    def idempotency_lock(self, key_hash: str) -> Path:
        return self.idempotency_dir / f"{key_hash}.lock"

    # --- daemon-wide files ---------------------------------------------------------------
    @property
    def users_dir(self) -> Path:
        """Multi-user mode: one ``<uid>/`` tree per owner."""
        return self.root / "users"

    @property
    def uploads_dir(self) -> Path:
        """The web API's staged uploads (private to the state root's owner)."""
        return self.root / "uploads"

    @property
    def hosts_dir(self) -> Path:
        """What is known about each configured remote host, one file per host."""
        return self.root / "hosts"

    def host(self, name: str) -> Path:
        """``hosts/<name>.json`` (``name`` must already be a validated host name)."""
        return self.hosts_dir / f"{name}.json"

    @property
    def runtime_deployments_dir(self) -> Path:
        """The scheduler lanes' verified runtime deployments (and the staging of one)."""
        return self.root / "runtime-deployments"

    def runtime_deployment(self, lane: str, program: str) -> Path:
        """``runtime-deployments/<lane>/<program>.json`` (both names already validated)."""
        return self.runtime_deployments_dir / lane / f"{program}.json"

    @property
    def outbox_dir(self) -> Path:
        """Messages waiting to be delivered, one file each."""
        return self.root / "outbox"

    @property
    def fetch_scratch_dir(self) -> Path:
        """Scratch copies of job snapshots being streamed to a remote ``vq fetch``."""
        return self.root / "outbox-fetch"

    @property
    def drain_file(self) -> Path:
        return self.root / "drain.json"

    @property
    def throttle_file(self) -> Path:
        return self.root / "throttle.json"

    @property
    def capacity_file(self) -> Path:
        """The caps the running daemon advertises."""
        return self.root / "daemon_capacity.json"

    @property
    def rpc_audit_log(self) -> Path:
        """One line per state-changing control call on the daemon's socket."""
        return self.root / "rpc-audit.jsonl"

    @property
    def fleet_audit_log(self) -> Path:
        """One line per state-changing request to the web API."""
        return self.root / "fleet-audit.jsonl"

    @property
    def job_naming_files(self) -> tuple[Path, ...]:
        """The daemon-wide files that name jobs (logs, audit logs, the terminal index):
        written with :data:`vq._fs.LOG_MODE`, never world-readable; a multi-user start
        makes each one ``root:<admin group>`` 0640 (:mod:`vq.services.system_tree`)."""
        return (
            self.daemon_log,
            self.web_log,
            *self.audit_logs,
            self.root / self.terminal_index.name,
        )

    @property
    def audit_logs(self) -> tuple[Path, ...]:
        """Every audit log, daemon's first."""
        return (self.rpc_audit_log, self.fleet_audit_log)

    @property
    def campaigns_dir(self) -> Path:
        """Where ``campaigns.json`` lives: the state root itself, or in multi-user mode the
        owner's ``campaigns/`` (the owner cannot write in the root-owned ``users/<uid>``)."""
        if self.owner_dir is None:
            return self.root
        return self.owner_dir / "campaigns"

    @property
    def campaigns_registry(self) -> Path:
        """The campaign run directories registered on this state root (``vq campaign``)."""
        return self.campaigns_dir / "campaigns.json"

    @property
    def web_log(self) -> Path:
        """The output of the daemon's web console child (``--web``)."""
        return self.root / "web.log"

    @property
    def daemon_lock(self) -> Path:
        """``queue/.vq-daemon.lock``; of an owner's tree, the system root's one lock."""
        if self.owner_dir is not None:
            return self.root / ".vq-daemon.lock"
        return self.queue_dir / ".vq-daemon.lock"

    @property
    def storage_probe(self) -> Path:
        """The spec-sized durable write that tells whether specs can be written again."""
        return self.queue_dir / ".vq-storage-probe.tmp"

    @property
    def daemon_pid(self) -> Path:
        return self.root / "daemon.pid"

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def daemon_sock(self) -> Path:
        return self.root / "daemon.sock"

    @property
    def doorbell(self) -> Path:
        """Multi-user mode: the datagram socket any user rings after writing a spec."""
        return self.root / "doorbell.sock"

    # --- per job ---------------------------------------------------------------------
    def spec(self, job_id: str) -> Path:
        return self.queue_dir / f"{job_id}{SPEC_SUFFIX}"

    def workspace(self, job_id: str) -> Path:
        return self.jobs_dir / job_id

    def tree_of(self, job_id: str) -> Path:
        """The trusted root of the tree holding ``job_id``'s files: nothing below it is
        followed when a file of the job is opened (``vq._safe_open``)."""
        return self.owner_root

    def meta_dir(self, job_id: str) -> Path:
        return self.workspace(job_id) / "_vq"

    def events(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "events.jsonl"

    def exit_code(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "exit-code"

    def environment(self, job_id: str) -> Path:
        """The submit's captured environment (mode 0600; values never leave it except
        into the job's own process or, on a lane, its batch script)."""
        return self.meta_dir(job_id) / "environment"

    def collector_pid(self, job_id: str) -> Path:
        """``<pid> <start ticks>`` of the job's collector, written as it starts."""
        return self.meta_dir(job_id) / "collector.pid"

    def resource_usage(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "resource-usage.json"

    def samples(self, job_id: str) -> Path:
        return self.meta_dir(job_id) / "samples.jsonl"

    def workdir(self, job_id: str) -> Path:
        return self.workdirs_dir / job_id

    def ensure(self) -> None:
        """Create the state tree (idempotent). The root is private to its owner."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        for directory in (self.queue_dir, self.jobs_dir, self.workdirs_dir):
            directory.mkdir(exist_ok=True)


#: The name this layout had before it covered multi-user trees; the same class.
StatePaths = StateLayout


class OwnerMap:
    """Which owner (uid) each job id of a multi-user root belongs to (§2.4).

    An id gets its owner when the daemon first sees it in exactly one tree (discovery
    over ``users/<uid>/queue``) or writes it there itself (a submit through the owner's
    socket, a job it creates: :meth:`claim`). The recorded owner keeps the job for as
    long as its own copy exists: a copy of the id that appears in another tree is an
    *impostor* (``impostors``), quarantined alone, and can neither hold the job up nor
    redirect its files. Ids found in several trees with no recorded owner (a daemon
    start, or copies written before the daemon saw either) are *ambiguous*: every copy
    is quarantined until one is left. ``changed`` collects the ids whose standing moved
    (ambiguous, released, re-owned), whose specs must be read again.

    Thread-safe: the submit sockets claim ids from their own threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: dict[str, int] = {}
        self.ambiguous: dict[str, tuple[int, ...]] = {}
        self.impostors: dict[str, tuple[int, ...]] = {}
        self._changed: builtins.set[str] = builtins.set()

    def get(self, job_id: str) -> int | None:
        return self._owner.get(job_id)

    def set(self, job_id: str, uid: int) -> None:
        """Record ``uid`` as the owner of ``job_id`` unless it already has one."""
        with self._lock:
            self._owner.setdefault(job_id, uid)

    def claim(self, job_id: str, uid: int) -> None:
        """The daemon wrote ``job_id`` into ``uid``'s tree itself: that is its owner, even
        over copies found elsewhere first (they become impostors at the next discovery)."""
        with self._lock:
            previous = self._owner.get(job_id)
            self._owner[job_id] = uid
            if self.ambiguous.pop(job_id, None) is not None or previous not in (None, uid):
                self._changed.add(job_id)

    def forget(self, job_id: str) -> None:
        with self._lock:
            self._owner.pop(job_id, None)
            self.ambiguous.pop(job_id, None)
            self.impostors.pop(job_id, None)

    def mark_changed(self, job_id: str) -> None:
        with self._lock:
            self._changed.add(job_id)

    def take_changed(self) -> builtins.set[str]:
        """The ids marked changed since the last call."""
        with self._lock:
            changed, self._changed = self._changed, builtins.set()
        return changed

    def items(self) -> list[tuple[str, int]]:
        with self._lock:
            return list(self._owner.items())


@dataclass(frozen=True)
class MultiUserLayout(StateLayout):
    """The system root of multi-user mode, as the root daemon sees it (§2.4).

    Daemon-wide files stay at the root (``.vq-daemon.lock`` too); every per-job path is
    routed to its owner's tree ``users/<uid>/`` through ``owners``. A job id with no
    known owner routes to ``users/unowned/``, which never exists, so nothing of it is
    read or written.
    """

    owners: OwnerMap = field(default_factory=OwnerMap, compare=False)
    #: one layout per owner, built once (path arithmetic is a hot path of every scan)
    _layouts: dict[int | None, StateLayout] = field(default_factory=dict, compare=False, repr=False)

    def owner_layout(self, job_id: str) -> StateLayout:
        uid = self.owners.get(job_id)
        layout = self._layouts.get(uid)
        if layout is None:
            owner = self.users_dir / (str(uid) if uid is not None else "unowned")
            layout = self._layouts[uid] = StateLayout(self.root, self.archive_override, owner)
        return layout

    @property
    def daemon_lock(self) -> Path:
        return self.root / ".vq-daemon.lock"

    @property
    def storage_probe(self) -> Path:
        return self.root / ".vq-storage-probe.tmp"

    def queue_of(self, uid: int) -> Path:
        return self.users_dir / str(uid) / "queue"

    def spec(self, job_id: str) -> Path:
        return self.owner_layout(job_id).spec(job_id)

    def workspace(self, job_id: str) -> Path:
        return self.owner_layout(job_id).workspace(job_id)

    def tree_of(self, job_id: str) -> Path:
        return self.owner_layout(job_id).owner_root

    def workdir(self, job_id: str) -> Path:
        return self.owner_layout(job_id).workdir(job_id)

    def ensure(self) -> None:
        """Nothing: the system tree is checked and repaired by ``system_tree`` instead."""


def client_layout(env: Mapping[str, str] | None = None, euid: int | None = None) -> StateLayout:
    """The layout a CLI works on: in multi-user mode (:mod:`vq.config.multi_user_root`) root
    gets the whole system root and any other user their own ``users/<euid>`` tree (daemon-wide
    files such as ``daemon.sock`` stay at the system root); otherwise the single-user
    state root. Raises :class:`vq.config.multi_user_root.UnreadablePolicy` (fail closed)."""
    env = os.environ if env is None else env
    root = multi_user_root.multi_user_root(env)
    if root is None:
        return StateLayout.from_env(env)
    euid = os.geteuid() if euid is None else euid
    if euid == 0:
        return MultiUserLayout(Path(root))
    return StateLayout(Path(root)).for_owner(euid)
