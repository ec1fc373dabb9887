"""The execution seam and the one lifecycle writer, kept by an AST check.

* Services reach a job's processes only through an executor: no module in
  ``vq.services`` signals a process (``os.kill``/``os.killpg``, or the executors'
  ``signal_group``) or reads the collector's exit marker.
* Only the lifecycle writer (``vq.services.lifecycle``, with the pure rules of what
  each request decides in ``vq.services.lifecycle_decisions``) applies a state
  transition: nothing else calls ``apply_transition`` or assigns a spec's ``state``.
* The daemon, the services and the gateway talk to executors only through their
  protocols (``vq.executors.base``: ``JobControl`` for any job's control, ``Engine`` for
  what the loop ticks, ``Executor``/``HostExecutor`` for the local machinery) and the registry
  (``vq.executors.registry``, which builds the local executor of a process without a
  daemon): no module in ``vq.daemon`` but the composition root, and none in
  ``vq.services`` or ``vq.gateway``, imports the local executor or uses what only it
  has (its fork server, its scope bookkeeping, its file paths), nor the process
  internals it is built on (``vq.executors.procs``, ``vq.executors.identity``): a
  question about a job's processes, such as whether a finished job's group still runs,
  is a protocol method (``still_running``).
* The daemon never decides by itself which executor runs a spec: no module in
  ``vq.daemon`` reads ``scheduler_target`` (the registry, ``vq.executors.registry``,
  partitions the specs and hands each executor its own).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).parent.parent.parent / "src" / "vq"
LIFECYCLE_WRITER = SRC / "services" / "lifecycle.py"
#: The writer's pure decisions (each request's rule, applied under the writer's lock).
LIFECYCLE_DECISIONS = SRC / "services" / "lifecycle_decisions.py"
#: Where the transition function itself is defined (pure rules, no writes).
TRANSITION_RULES = SRC / "domain" / "lifecycle.py"

SIGNALLING = {"kill", "killpg", "signal_group", "terminate_group"}

DAEMON = SRC / "daemon"
#: The one ``vq.daemon`` module that builds the local executor (and attaches its fork server).
COMPOSITION_ROOT = DAEMON / "compose.py"
#: Packages that hold executors only through the protocols (the daemon: but its root).
PROTOCOL_ONLY = (DAEMON, SRC / "services", SRC / "gateway")
#: The local executor and the process internals only it builds on.
LOCAL_EXECUTOR_MODULES = {
    "vq.executors.local",
    "vq.executors.forkserver_client",
    "vq.executors.procs",
    "vq.executors.identity",
}
#: ``vq.daemon`` modules that may read a spec's ``scheduler_target`` (none: ask the registry).
TARGET_READERS: frozenset[Path] = frozenset()


def _modules(under: Path) -> list[Path]:
    return sorted(under.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(SRC))


def _called_name(node: ast.Call) -> str | None:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def signalling_in(source: str) -> list[str]:
    """Process signalling and collector-marker reads found in ``source``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in {"os", "signal"}:
            problems += [
                f"line {node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if a.name in {"kill", "killpg", "pidfd_send_signal"}
            ]
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vq.executors"):
            problems += [
                f"line {node.lineno}: imports {node.module}.{a.name}"
                for a in node.names
                if a.name in SIGNALLING
            ]
        if isinstance(node, ast.Call):
            func, name = node.func, _called_name(node)
            if name in {"signal_group", "terminate_group"}:
                problems.append(f"line {node.lineno}: calls {name}()")
            elif name in {"kill", "killpg"} and (
                isinstance(func, ast.Name)  # from os import kill
                or (isinstance(func, ast.Attribute) and _is_name(func.value, "os"))
            ):
                problems.append(f"line {node.lineno}: calls os.{name}()")
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in {"exit_code", "collector_pid"}
                and isinstance(func.value, ast.Attribute)
                and func.value.attr == "paths"
            ):
                problems.append(f"line {node.lineno}: reads the collector's {func.attr} file")
    return problems


def _is_name(node: ast.expr, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def transitions_in(source: str) -> list[str]:
    """Transition applications and ``.state`` assignments found in ``source``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and _called_name(node) in {
            "apply_transition",
            "check_transition",
        }:
            problems.append(f"line {node.lineno}: calls {_called_name(node)}()")
        if isinstance(node, ast.ImportFrom) and node.module == "vq.domain.lifecycle":
            problems += [
                f"line {node.lineno}: imports {a.name}"
                for a in node.names
                if a.name == "apply_transition"
            ]
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "state":
                    problems.append(f"line {node.lineno}: assigns .state")
    return problems


def local_only_names() -> frozenset[str]:
    """What the local executor has beyond the protocols: its public methods that are no
    protocol method, and its public state (fork server, cgroup mode, scopes)."""
    from vq.executors.base import HostExecutor
    from vq.executors.local import LocalExecutor

    methods = {name for name, value in vars(LocalExecutor).items() if callable(value)}
    state = {"forkserver", "cgroup", "scopes"}
    protocol = {name for name in dir(HostExecutor) if not name.startswith("_")}
    return frozenset(name for name in methods | state if not name.startswith("_")) - protocol


def local_executor_uses_in(source: str) -> list[str]:
    """Imports of the local executor and uses of what only it has, found in ``source``."""
    local_only = local_only_names()
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "") in LOCAL_EXECUTOR_MODULES:
            problems.append(f"line {node.lineno}: imports {node.module}")
        elif isinstance(node, ast.Import):
            problems += [
                f"line {node.lineno}: imports {a.name}"
                for a in node.names
                if a.name in LOCAL_EXECUTOR_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module == "vq.executors":
            problems += [
                f"line {node.lineno}: imports vq.executors.{a.name}"
                for a in node.names
                if f"vq.executors.{a.name}" in LOCAL_EXECUTOR_MODULES
            ]
        elif isinstance(node, ast.Attribute) and node.attr in local_only:
            problems.append(f"line {node.lineno}: uses LocalExecutor.{node.attr}")
    return problems


def target_reads_in(source: str) -> list[str]:
    """Reads of a spec's ``scheduler_target`` found in ``source`` (an attribute, or the
    name as a key: ``spec["scheduler_target"]``, ``getattr(spec, "scheduler_target")``)."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "scheduler_target":
            problems.append(f"line {node.lineno}: reads .scheduler_target")
        elif isinstance(node, ast.Constant) and node.value == "scheduler_target":
            problems.append(f"line {node.lineno}: names 'scheduler_target'")
    return problems


@pytest.mark.parametrize("path", _modules(SRC / "services"), ids=_name)
def test_services_never_signal_processes_or_read_markers(path: Path) -> None:
    problems = signalling_in(path.read_text())
    assert not problems, f"{_name(path)} reaches a job's processes without its executor: " + (
        "; ".join(problems)
    )


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in _modules(SRC)
        if p not in (LIFECYCLE_WRITER, LIFECYCLE_DECISIONS, TRANSITION_RULES)
    ],
    ids=_name,
)
def test_only_the_lifecycle_writer_applies_transitions(path: Path) -> None:
    problems = transitions_in(path.read_text())
    assert not problems, (
        f"{_name(path)} changes a job's state outside {_name(LIFECYCLE_WRITER)}: "
        + ("; ".join(problems))
    )


@pytest.mark.parametrize(
    "path",
    [p for under in PROTOCOL_ONLY for p in _modules(under) if p != COMPOSITION_ROOT],
    ids=_name,
)
def test_the_daemon_and_services_talk_to_executors_only_through_the_protocol(
    path: Path,
) -> None:
    problems = local_executor_uses_in(path.read_text())
    assert not problems, (
        f"{_name(path)} reaches past the executor protocol (vq.executors.base): "
        + "; ".join(problems)
    )


def test_the_local_only_names_are_what_the_protocol_lacks() -> None:
    names = local_only_names()
    assert {"attach_fork_server", "forkserver", "cgroup", "start_record_path"} <= names
    assert not names & {
        "launch",
        "cancel",
        "running",
        "still_running",
        "force_stop",
        "watcher_alive",
        "find_lost_launch",
        "start",
    }


@pytest.mark.parametrize(
    "source",
    [
        "from vq.executors.local import LocalExecutor\n",
        "from vq.executors import local\n",
        "self.executor.forkserver.ping(timeout=1)\n",
        "parts.executor.attach_fork_server(on_exit)\n",
        "mode = parts.executor.cgroup\n",
        "record = executor.start_record_path(spec)\n",
        "from vq.executors.local import LocalExecutor as Local\n",
        "from vq.executors.procs import live_groups\n",
        "from vq.executors.identity import group_is_job\n",
        "from vq.executors import procs\n",
        "import vq.executors.identity\n",
    ],
)
def test_the_local_executor_check_sees_each_form(source: str) -> None:
    assert local_executor_uses_in(source)


def test_a_protocol_call_is_not_a_local_executor_use() -> None:
    assert not local_executor_uses_in(
        "self.executor.watcher_alive(holder.handle)\nself.executor.find_lost_launch(job)\n"
        "from vq.executors.base import HostExecutor\n"
    )


@pytest.mark.parametrize(
    "path", [p for p in _modules(DAEMON) if p not in TARGET_READERS], ids=_name
)
def test_the_daemon_asks_the_registry_which_executor_runs_a_spec(path: Path) -> None:
    problems = target_reads_in(path.read_text())
    assert not problems, (
        f"{_name(path)} branches on a spec's execution target; ask "
        "vq.executors.registry (partition, is_local, lane_of) instead: " + "; ".join(problems)
    )


@pytest.mark.parametrize(
    "source",
    [
        "if spec.scheduler_target is None:\n    pass\n",
        "local = [s for s in specs if not s.scheduler_target]\n",
        "target = row['scheduler_target']\n",
        "target = getattr(spec, 'scheduler_target')\n",
    ],
)
def test_the_target_check_sees_each_form(source: str) -> None:
    assert target_reads_in(source)


def test_a_docstring_mentioning_the_target_is_not_a_read() -> None:
    assert not target_reads_in('"""A spec\'s ``scheduler_target`` picks its lane."""\n')


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.killpg(1, 9)\n",
        "import os\nos.kill(1, 9)\n",
        "from os import killpg\n",
        "from vq.executors.procs import signal_group\n",
        "from vq.executors import procs\nprocs.signal_group(5, 15)\n",
        "def f(ctx):\n    return open(ctx.paths.exit_code('x'))\n",
    ],
)
def test_the_signalling_check_sees_each_form(source: str) -> None:
    assert signalling_in(source)


@pytest.mark.parametrize(
    "source",
    [
        "from vq.domain.lifecycle import apply_transition\n",
        "apply_transition(spec, JobState.FAILED, now)\n",
        "spec.state = JobState.RUNNING\n",
    ],
)
def test_the_transition_check_sees_each_form(source: str) -> None:
    assert transitions_in(source)


def test_a_service_verb_named_kill_is_not_signalling() -> None:
    assert not signalling_in("lifecycle.kill('x', 'why')\nLifecycle(ctx).kill('x', 'y')\n")


def test_the_lifecycle_decisions_are_seen_applying_transitions() -> None:
    assert transitions_in(LIFECYCLE_DECISIONS.read_text())
