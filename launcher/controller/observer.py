"""What the controller tells an observer of its run (e.g. the experiment tracker)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class RunObserver(Protocol):
    def run_started(self) -> None:
        """This controller took the run."""

    def run_ended(self, state: str) -> None:
        """This controller let go of the run, in `state` (terminal, or left for a resume)."""
