"""`markov-dp-multi-zone`: `markov-dp` over several zones, by one step of policy improvement.

Each zone has its own availability model (`availability_model.ZoneModel`, its prior from the zone's
interruption band when the controller knows it) and its own table: `markov-dp`'s exact DP for the
policy "commit to this zone from now on" (wait for its capacity, start spot there, or run
on-demand). At a decision, every zone's table is read at the run's time, progress and cluster
(on-demand is the same cluster in every plan; idle is idle), and the policy acts by the zone whose
commitment is expected to cost least to finish: spot in that zone, on-demand, or wait. That is one
step of policy improvement over the commit-to-one-zone policies, so under the models it is never
dearer than staying with its own zone, which is what single-zone `markov-dp` does; a move is also a
restart, and the tables price it as one. It takes another zone's plan only when that saves more
than `move_margin` restarts at the spot price over its own zone's plan: estimates that differ by
noise must not move it, and a zone whose plan only ties stays a zone it is not in.

A live spot cluster is kept (as in `markov-dp`). Tables are solved in chunks spread over decisions,
one zone's chunk per decision, the zone it is in first, so a decision costs what a `markov-dp`
decision costs; the first decision solves only its own zone's coarse table, so another zone counts
once its table is ready. With no table able to keep the reserve, `multi-zone` (the rule-based policy)
decides; every decision goes through `safety.enforce`.
"""

from __future__ import annotations

import math

from launcher.policies.availability_model import ZoneModel
from launcher.policies.base import Choice, Decision, DecisionState
from launcher.policies.chain_dp import ChainTable
from launcher.policies.deadline_aware import prices
from launcher.policies.markov_dp import MarkovDPPolicy, _Plan, _Solve
from launcher.policies.safety import Budget, enforce

_VERB = {Choice.SPOT: "spot", Choice.ON_DEMAND: "on-demand", Choice.NONE: "wait"}


class MarkovDPMultiZonePolicy(MarkovDPPolicy):
    name = "markov-dp-multi-zone"
    multi_zone = True

    def __init__(self, *, move_margin: float = 0.5, **params) -> None:
        """`move_margin`: act by another zone's plan only when it is expected to save more than this
        many restart overheads at the spot price over the plan of the zone it is in. Other
        parameters: `markov-dp`'s."""
        if move_margin < 0:
            raise ValueError("move_margin must be >= 0")
        self.move_margin = move_margin
        super().__init__(**params)

    def reset(self) -> None:
        from launcher.policies.multi_zone import MultiZonePolicy

        super().reset()
        self.models: dict[int, ZoneModel] = {}
        self.plans: dict[int, _Plan] = {}
        self._solves: dict[int, _Solve] = {}
        self._spares: list[ChainTable] = []  # tables of replaced plans: memory for the next solves
        self._step_t = -math.inf
        self._fallback = MultiZonePolicy(poll_hours=self.poll_hours)

    # ---- models and tables ------------------------------------------------------------------------
    def _observe(self, state: DecisionState) -> None:
        for z, up in enumerate(state.spot_available):
            m = self.models.get(z)
            if m is None:
                prior = self._zone_priors.get(z, self.prior_up_hours)
                m = self.models[z] = ZoneModel(prior, self.prior_down_hours, self.prior_weight, self.bin_weight,
                                               self.cycle_prior)  # fmt: skip
                if z in self._seeds:
                    m.seed_up(*self._seeds[z])
            m.observe(state.elapsed_hours, up)
        self.model = self.models[state.current_zone]  # what the reasons of `markov-dp` read

    def _begin(self, state: DecisionState, z: int) -> None:
        spare = self._spares.pop() if self._spares else None
        solve = self._start_solve(state, self.max_ticks, self.models[z], spare)
        if solve is None:  # no plan keeps the reserve from here: the rule-based policy decides
            if spare is not None:
                self._spares.append(spare)
            self._drop(self.plans.pop(z, None))
        else:
            self._solves[z] = solve

    def _drop(self, plan: _Plan | None) -> None:
        if plan is not None:
            self._spares.append(plan.table)

    def _advance(self, state: DecisionState) -> None:
        """Start the solves that are due, then run one chunk of one of them (own zone first)."""
        t, here = state.elapsed_hours, state.current_zone
        if not self.plans and not self._solves and self._step_t == -math.inf:  # the first decision
            first = self._start_solve(state, self.first_ticks, self.models[here])
            if first is not None:
                self.plans[here] = first.finish()
            for z in self.models:
                self._begin(state, z)
            self._step_t = t
            return
        if t <= self._step_t:
            return
        self._step_t = t
        for z, m in self.models.items():
            if z in self._solves:
                continue
            plan = self.plans.get(z)
            if plan is None:
                self._begin(state, z)
                continue
            age = t - plan.t0
            if age >= self.resolve_hours - 1e-9 and (age >= self.stale_hours - 1e-9 or self._moved(plan, m)):
                self._begin(state, z)
        for z in (here, *sorted(self._solves)):
            solve = self._solves.get(z)
            if solve is not None:
                if solve.step():
                    self._drop(self.plans.get(z))
                    self.plans[z] = solve.plan
                    del self._solves[z]
                return

    # ---- deciding ---------------------------------------------------------------------------------
    def _no_deadline(self, state: DecisionState) -> Decision:
        z = state.current_zone
        up = [i for i, a in enumerate(state.spot_available) if a]
        if up:
            return Decision(Choice.SPOT, z if z in up else up[0], "spot, no deadline")
        return Decision(Choice.NONE, z, "wait for spot, no deadline")

    def _choose(self, state: DecisionState, b: Budget, fallback: Decision) -> Decision:
        """The cheapest zone's plan, unless it saves too little over the plan of the zone it is in."""
        z = state.current_zone
        held = Choice.ON_DEMAND if state.current is Choice.ON_DEMAND else Choice.NONE
        owed = state.overhead_remaining_hours if held is Choice.ON_DEMAND else 0.0
        scored = {}
        for zone, plan in self.plans.items():
            choice, cost = plan.at(state, held, owed, state.spot_available[zone])
            if math.isfinite(cost):
                scored[zone] = (cost, choice)
        if not scored:
            why = f"no model plan keeps the reserve; multi-zone: {fallback.reason}"
            return Decision(fallback.choice, fallback.zone, why)
        best = min(scored, key=lambda zone: (scored[zone][0], zone != z, zone))
        pick = best
        if z in scored and scored[best][0] > scored[z][0] - self.move_margin * state.restart_overhead_hours * prices(state)[1]:
            pick = z  # another zone's plan saves too little to trust the difference of two estimates
        cost, choice = scored[pick]
        zone = pick if choice is Choice.SPOT else z
        return enforce(state, Decision(choice, zone, self._why(state, pick, choice, cost, scored)), b)

    def _why(self, state: DecisionState, pick: int, choice: Choice, cost: float, scored: dict) -> str:
        z = state.current_zone
        key = (pick, choice, self.plans[pick].t0, z, scored.get(z, (None,))[0] if pick != z else None)
        if self._last_reason is not None and self._last_reason[0] == key:
            return self._last_reason[1]
        m = self.models[pick]
        est = f"zone {pick} model: expected up {m.mean_hours(1):.1f} h, down {m.mean_hours(0):.1f} h{m.cycle_text()}"
        if pick == z:
            why = f"{est}; the optimal policy for it: {_VERB[choice]} (expected ${cost:.2f} to finish)"
        elif z in scored:
            why = (f"{est}; committing to it: {_VERB[choice]} (expected ${cost:.2f} to finish, "
                   f"${scored[z][0] - cost:.2f} less than with zone {z}'s plan)")  # fmt: skip
        else:
            why = f"{est}; committing to it: {_VERB[choice]} (expected ${cost:.2f} to finish; zone {z} has no plan yet)"
        self._last_reason = (key, why)
        return why
