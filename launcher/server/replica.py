"""One server replica: claims runs through leases and drives each in a controller thread.

Every `heartbeat_s` one loop renews all of this replica's leases (one UPDATE), notices leases
it lost, and claims waiting or expired runs up to `max_runs`. A claimed run gets the same
controller `launch` uses (controller.runner.run_controller), writing through a FencedLedger:
the moment another replica adopts the run, every write of this one fails, so it can neither
open nor close an attempt nor move the run. An adopted run is continued as `launch --resume`
does: the dead owner's open attempt is closed as abandoned (its processes killed, its cluster
torn down) and the next attempt resumes from the last checkpoint.

Lease time: a replica that dies is replaced after at most `ttl_s` plus one heartbeat of the
adopter. The heartbeat must be well under the TTL (default a third) so that a slow tick does
not lose leases.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from launcher.ledger.leases import Claim, LeaseLedger, LeaseLostError
from launcher.ledger.records import TERMINAL_RUN_STATES
from launcher.server.local_jobs import LocalJobs

DEFAULT_LEASE_TTL_S = 30.0


def new_owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class ReplicaStats:
    ticks: int = 0
    claimed: int = 0
    adopted: int = 0
    finished: int = 0
    lost: int = 0
    tick_seconds: list[float] = field(default_factory=list)  # the last 1000 ticks' durations


class Replica:
    def __init__(
        self,
        ledger: LeaseLedger,
        *,
        owner_id: str | None = None,
        ttl_s: float = DEFAULT_LEASE_TTL_S,
        heartbeat_s: float | None = None,
        max_runs: int = 50,
        claim_batch: int = 4,
        log: Callable[[str], None] | None = None,
        drive: Callable[[LeaseLedger, Claim], object] | None = None,
        local_jobs: LocalJobs | None = None,
    ) -> None:
        self.led = ledger
        self.owner_id = owner_id or new_owner_id()
        self.ttl_s = ttl_s
        self.heartbeat_s = heartbeat_s if heartbeat_s is not None else ttl_s / 3
        if self.heartbeat_s >= ttl_s:
            raise ValueError("the lease heartbeat must be shorter than the lease time")
        self.max_runs = max_runs
        self.claim_batch = claim_batch  # per tick: replicas ticking together share new work
        self._log = log or _stderr
        self.local_jobs = local_jobs or LocalJobs()
        self._drive = drive or self._run_controller
        self._running: dict[str, tuple[Claim, threading.Thread]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats = ReplicaStats()

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Replica:
        self._thread = threading.Thread(target=self._loop, name="replica", daemon=True)
        self._thread.start()
        return self

    def stop(self, *, release: bool = True) -> int:
        """Stop claiming and renewing; hand all leases back so another replica takes the runs at
        once (their controllers in this process can no longer write). Returns how many."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 30)
        return self.led.release_all(self.owner_id) if release else 0

    def running(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    # ---- the loop ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self.tick()
            except Exception as e:  # the database may be away for a moment: try again next beat
                self._log(f"replica tick failed: {type(e).__name__}: {e}")
            took = time.monotonic() - t0
            self.stats.tick_seconds = [*self.stats.tick_seconds[-999:], took]
            self._stop.wait(max(0.0, self.heartbeat_s - took))

    def tick(self) -> list[Claim]:
        """Renew, notice lost leases, claim new runs. Returns the new claims."""
        self.stats.ticks += 1
        held = self.led.renew_leases(self.owner_id, ttl_s=self.ttl_s)
        with self._lock:
            for run_id in [r for r in self._running if r not in held and self._running[r][1].is_alive()]:
                self.stats.lost += 1
                self._log(f"run {run_id}: lease lost to another replica; its controller here can no longer write")
            self._running = {r: v for r, v in self._running.items() if v[1].is_alive()}
            free = min(self.max_runs - len(self._running), self.claim_batch)
        claims = self.led.claim_leases(self.owner_id, ttl_s=self.ttl_s, limit=free) if free > 0 else []
        for claim in claims:
            self.stats.claimed += 1
            self.stats.adopted += claim.adopted_from is not None
            how = f"adopted from {claim.adopted_from}" if claim.adopted_from else "claimed"
            self._log(f"run {claim.run_id}: {how} (lease generation {claim.generation})")
            t = threading.Thread(target=self._drive_one, args=(claim,), name=f"run-{claim.run_id}", daemon=True)
            with self._lock:
                self._running[claim.run_id] = (claim, t)
            t.start()
        return claims

    def _drive_one(self, claim: Claim) -> None:
        fenced = self.led.fenced(claim.run_id, self.owner_id, claim.generation)
        done = False
        try:
            self._drive(fenced, claim)
            done = self.led.get_run(claim.run_id).state in TERMINAL_RUN_STATES
        except LeaseLostError:
            self._log(f"run {claim.run_id}: lease lost; stopped driving it")
            return
        except Exception as e:
            # The controller recorded `controller_error`; the run is left for `launcher down` or
            # `launch --resume` (retrying here could loop on a deterministic bug).
            self._log(f"run {claim.run_id}: controller failed: {type(e).__name__}: {e}")
            done = True
        finally:
            self.stats.finished += 1
        if self.led.release_lease(claim.run_id, self.owner_id, claim.generation, done=done):
            self._log(f"run {claim.run_id}: {self.led.get_run(claim.run_id).state}; lease released")


    def _run_controller(self, ledger: LeaseLedger, claim: Claim) -> object:
        from launcher.controller.runner import run_controller

        run_as, refuse = self.local_jobs.decide_for_run(self.led, claim.run_id)
        mode = "server-adopted" if claim.adopted_from else "server"
        return run_controller(
            claim.run_id, ledger, mode=mode, install_signals=False,
            notify=lambda msg: _stderr(f"run {claim.run_id}: {msg}"), local_run_as=run_as, refuse_local=refuse,
        )  # fmt: skip


def _stderr(msg: str) -> None:
    sys.stderr.write(f"{datetime.now(UTC):%H:%M:%S} {msg}\n")
    sys.stderr.flush()
