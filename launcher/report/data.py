"""What a report reads from the ledger, as frames (see load.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from launcher.ledger.attempt_cost import EventFacts

# columns a report can group by (the attempts frame's names)
KEY_SOURCES = ("project", "experiment", "owner", "cost_center", "cloud", "region", "run_id", "attempt_id")


@dataclass(frozen=True)
class LedgerData:
    """What a report reads from the ledger (see load.py), times as float epoch seconds UTC.

    attempts: the ledger's attempt columns joined with their run's project, experiment, owner,
      cost_center (and `tags`, a dict per row, when loaded for --by attempt).
    facts: events reduced per attempt; facts.checkpoints also carries run_ended_at and the
      key columns of KEY_SOURCES for grouping.
    """

    attempts: pd.DataFrame
    facts: EventFacts
    as_of: float
