"""The runtime identity of a scheduler-lane job that names a managed-runtime program
(§3.4): the target's runtime is authoritative, never a same-named checkout on the driver.

A ``venv`` program is a managed runtime. For a lane job its identity must resolve on the
target, and the one target identity this driver can name without asking the cluster is
an immutable runtime generation the job is bound to (``--runtime-root`` and
``--runtime-artifact``; the job script verifies it on the compute node before anything
runs). Without one the submit is refused before any spec exists: vq never downgrades the
request to the driver's own checkout. The pin records the lane (``scheduler_host``) and
the generation's digest (``artifact_identity``); the lane refuses at dispatch a pin made
for another target (:func:`vq.executors.scheduler.outcome.pin_refusal`). Other program
kinds keep the ordinary submit-time snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping

from vq.config_programs import ProgramSettings, VenvProgram
from vq.domain.spec import ProgramRuntimePin
from vq.errors import InvalidInput

__all__ = ["is_managed", "lane_pin"]


def is_managed(programs: Mapping[str, ProgramSettings], name: str) -> bool:
    """Whether ``name`` is a registered managed-runtime (``venv``) program."""
    return isinstance(programs.get(name), VenvProgram)


def lane_pin(
    name: str, target: str, artifact: str | None, expected_sha: str | None
) -> ProgramRuntimePin:
    """The pin of a lane job naming managed program ``name``, or the refusal."""
    if expected_sha is not None:
        raise InvalidInput(
            f"--expected-sha cannot be checked for scheduler lane {target!r}: only the "
            "cluster sees the runtime that will run",
            hint="bind the job to a deployed runtime generation (--runtime-root ROOT "
            "--runtime-artifact DIGEST) instead; its digest is the identity",
        )
    if artifact is None:
        raise InvalidInput(
            f"program {name!r} is a managed runtime, and its runtime on scheduler lane "
            f"{target!r} cannot be resolved here: the driver's own checkout is not the "
            "cluster's",
            hint="deploy the runtime where the compute nodes see it (`vq runtime deploy "
            "DIR --root ROOT`) and submit with --runtime-root ROOT --runtime-artifact DIGEST",
        )
    return ProgramRuntimePin(
        program=name, kind="venv", scheduler_host=target, artifact_identity=artifact
    )
