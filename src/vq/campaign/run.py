"""``vq campaign run``: the controller's loop, its preflight and its registration.

Contracts:

* Preflight, before anything is submitted: every node's host must be one this controller
  reaches (:meth:`vq.campaign.host_directory.HostDirectory.problem`), a node's runtime
  generation must be one ``vq submit`` would accept there as far as this machine can tell
  (:meth:`~vq.campaign.host_directory.HostDirectory.runtime_problem`), and every sources
  pin must match (exit 1 otherwise, as ``vq campaign validate``).
* The loop holds ``controller.lock`` throughout (a second controller is refused), passes
  until the campaign succeeds or nothing more can run (no job in flight, no queue call to
  retry, and a pass that changed nothing), and sleeps ``interval`` seconds between passes
  while jobs run. ``once`` stops after one pass. A problem is logged when a pass first
  finds it (an unreachable host, a refused submission), not again while it persists.
* The run directory is registered in the state's ``campaigns.json`` (in multi-user mode
  the owner's ``users/<uid>/campaigns/campaigns.json``) so the console can find it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vq._fs import atomic_write_json, spec_lock
from vq.campaign.controller import Controller, PassResult
from vq.campaign.files import LoadedCampaign, check_sources, read_json_file
from vq.campaign.hosts import CampaignHost
from vq.campaign.planner import CampaignPlan, attention
from vq.campaign.rundir import RunDir, hold_lock, write_journal
from vq.errors import InvalidInput, PermissionDenied, VqError
from vq.paths import StateLayout

__all__ = ["REGISTRY_SCHEMA", "RunReport", "preflight", "register", "run_campaign"]

REGISTRY_SCHEMA = "vq.campaign-registry/1"


@dataclass
class RunReport:
    plan: CampaignPlan
    problems: list[str] = field(default_factory=list)
    passes: int = 0
    once: bool = False

    @property
    def needs_attention(self) -> list[str]:
        """The last pass's problems, then every node that needs someone to act."""
        return [*self.problems, *attention(self.plan)]

    @property
    def exit_code(self) -> int:
        """0 only when the campaign succeeded, or with ``once`` while it still progresses
        without a problem; else 1."""
        if self.plan.status == "succeeded":
            return 0
        return 0 if self.once and self.plan.status == "running" and not self.problems else 1


def preflight(
    loaded: LoadedCampaign,
    host_problem: Callable[[str | None], str | None],
    runtime_problem: Callable[[str | None, str, str], str | None],
) -> None:
    """Refuse a campaign this controller cannot run, before anything is submitted."""
    for node in loaded.campaign.nodes:
        problem = host_problem(node.host)
        if problem is not None:
            raise InvalidInput(
                f"node {node.id!r}: {problem}", hint="nothing was submitted; see docs/campaigns.md"
            )
        if node.runtime_digest is not None and node.runtime_root is not None:
            problem = runtime_problem(node.host, node.runtime_root, node.runtime_digest)
            if problem is not None:
                raise InvalidInput(
                    f"node {node.id!r}: {problem}",
                    hint="nothing was submitted; deploy the generation there with "
                    "`vq runtime deploy DIR --root ROOT`, or fix runtime_root",
                )
    for check in check_sources(loaded):
        if check.problems:
            raise VqError(
                f"{loaded.path}: {check.problems[0].text()}",
                hint="every pin is checked before anything is submitted; "
                "`vq campaign validate` prints the actual digest",
                reference="campaign-sources-mismatch",
            )


def register(state: StateLayout, run_dir: RunDir, loaded: LoadedCampaign, now: str) -> None:
    """Add or refresh this run directory in ``state``'s ``campaigns.json``
    (PermissionDenied when its directory cannot be made: a multi-user owner's is
    provisioned by ``vq admin user add``)."""
    try:
        state.campaigns_dir.mkdir(parents=True, exist_ok=True)
    except PermissionError:
        raise PermissionDenied(
            f"cannot create {state.campaigns_dir}, where campaigns are registered: "
            "permission denied",
            hint="ask an administrator to run `vq admin user add USER` (it provisions it)"
            if state.owner_dir is not None
            else f"check the permissions of {state.campaigns_dir.parent}",
        ) from None
    path = state.campaigns_registry
    with spec_lock(path):
        try:
            data: Any = read_json_file(path, "campaign registry")
        except VqError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("campaigns"), list):
            data = {"schema_name": REGISTRY_SCHEMA, "campaigns": []}
        run = str(run_dir.root.resolve())
        kept = [c for c in data["campaigns"] if isinstance(c, dict) and c.get("run_dir") != run]
        kept.append(
            {
                "run_dir": run,
                "campaign_file": str(loaded.path.resolve()),
                "campaign_id": loaded.campaign.campaign_id,
                "campaign_sha256": loaded.digest,
                "registered_at": now,
            }
        )
        data["campaigns"] = kept
        atomic_write_json(path, data)


def run_campaign(
    loaded: LoadedCampaign,
    run_dir: RunDir,
    *,
    hosts: Callable[[str | None], CampaignHost],
    host_problem: Callable[[str | None], str | None],
    runtime_problem: Callable[[str | None, str, str], str | None],
    state: StateLayout,
    interval: float,
    once: bool,
    sleep: Callable[[float], None],
    now: Callable[[], str],
    log: Callable[[str], None],
) -> RunReport:
    """Run the campaign in ``run_dir`` until it is done (module contract)."""
    preflight(loaded, host_problem, runtime_problem)
    run_dir.root.mkdir(parents=True, exist_ok=True)
    with hold_lock(run_dir):
        controller = Controller(loaded, run_dir, hosts, now, log)
        if not run_dir.journal.exists():
            write_journal(run_dir, controller.journal)
        register(state, run_dir, loaded, now())
        report = RunReport(controller.plan(), once=once)
        while True:
            result: PassResult = controller.run_pass()
            report.passes += 1
            for problem in result.problems:
                if problem not in report.problems:  # each once while it persists
                    log(problem)
            report.problems = result.problems
            report.plan = controller.plan()
            if once or report.plan.status == "succeeded":
                break
            if not (result.in_flight or result.retry_later or result.changed):
                break
            if result.in_flight or not result.changed:
                sleep(interval)
        return report
