"""What ``vq campaign cleanup`` may list, decided from the campaign, journal and plan only.

* The payload of every attempt the queue accepted (any state but ``submitting``): only a
  submitting attempt is ever resent, so only its payload is kept.
* With ``--intermediate``: each verified output that one or more nodes consume, once its
  producer attempt is off the retention list (every consumer of that attempt succeeded).

Never listed: an output nothing consumes (a result of the campaign), an output on the
retention list, a manifest, the journal. Leftovers of an interrupted publish or stage
(``incoming/``, ``*.staging``, ``*.copy``) are found by listing the run directory.
"""

from __future__ import annotations

from dataclasses import dataclass

from vq.campaign.checks import consumers_of
from vq.campaign.journal import Journal
from vq.campaign.model import Campaign
from vq.campaign.planner import CampaignPlan

__all__ = ["Intermediate", "accepted_payloads", "intermediate_outputs"]


@dataclass(frozen=True)
class Intermediate:
    node: str
    attempt: int
    output: str
    consumers: tuple[str, ...]


def accepted_payloads(journal: Journal) -> list[tuple[str, int]]:
    """(node, attempt) of every attempt past ``submitting``, in journal order."""
    return [(a.node, a.attempt) for a in journal.attempts if a.state != "submitting"]


def intermediate_outputs(
    campaign: Campaign, journal: Journal, plan: CampaignPlan
) -> list[Intermediate]:
    """Verified, consumed outputs of attempts that are off the retention list."""
    retained = {(item.node, item.attempt) for item in plan.retention}
    out: list[Intermediate] = []
    for (producer, output), consumers in consumers_of(campaign).items():
        for attempt in journal.of(producer):
            record = attempt.output(output)
            if attempt.state != "succeeded" or record is None or record.status != "verified":
                continue
            if (producer, attempt.attempt) in retained:
                continue
            out.append(Intermediate(producer, attempt.attempt, output, tuple(consumers)))
    return out
