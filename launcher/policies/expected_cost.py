"""`expected-cost` (one zone) and `expected-cost-multi-zone`: placement decided from a model, not from thresholds.

At every decision the policy

1. updates each zone's availability model from what it observed (`availability_model.ZoneModel`:
   Gamma posteriors of the rates up->down and down->up, per hour of the run's day, shrunk to the
   zone's overall rates, those to a prior from the offer's interruption band);
2. every `resolve_hours` (and at the first decision) solves the expected cost to finish under that
   model by dynamic programming over (time to the deadline, work left, what is held, capacity up or
   down) on a coarse grid (`cost_to_go.solve`);
3. scores each action open now (stay, start spot here or in another zone, wait, on-demand) by its
   expected cost over the next grid step plus the expected cost to finish after it, and takes the
   cheapest; a live spot cluster is always kept (keeping it dominates: the same progress, cheaper,
   and the safety net keeps the slack to move to on-demand whenever it is preempted);
4. **no regret against the simple policies**: it replays greedy, uniform progress and its own
   model-only rule on the observed history (`shadow.ShadowRun`: what each would have paid so far,
   under the simulator's rules) and scores each as paid so far + the model's expected cost to finish
   from where it would be. When a baseline's score beats the leader's by more than the switching
   margin (one restart at the on-demand price for each side of the switch, plus `noise_fraction`
   of the job's on-demand cost), it follows that baseline's current choice; it switches back the
   same way. Every decision then goes through the safety net (`safety.enforce`).

Every reason names the estimate it acted on, e.g. "zone 1: expected up 3.2 h, down 0.8 h (daily cycle,
up most at run hour 14: 92%); spot saves $4.10 over waiting (expected $51.30 to finish)".
"""

from __future__ import annotations

import math

from launcher.policies.availability_model import HOURS_PER_DAY, ZoneModel
from launcher.policies.base import Choice, Decision, DecisionState, PlacementPolicy, any_seen_up, seen_capacity
from launcher.policies.baselines import GreedyPolicy, UniformProgressPolicy
from launcher.policies.cost_to_go import (
    D0,
    D1,
    N0,
    N1,
    Prices,
    StepModel,
    ValueTable,
    q_values,
    solve,
    solve_in_chunks,
)
from launcher.policies.deadline_aware import prices
from launcher.policies.safety import DEFAULT_POLL_HOURS, budget, enforce, holding_spot, snap_to_tick
from launcher.policies.shadow import ShadowRun
from launcher.policies.zone_history import ZoneHistory

SELF = "model"
BASELINES = ("greedy", "uniform-progress")
SOLVE_CHUNK = 12  # DP time steps per decision while a new table is being solved


def _mean_up_if_preempted(lam: float, dt: float) -> float:
    """E[T | T < dt] for T ~ Exp(lam)."""
    x = lam * dt
    if x < 1e-6:
        return dt / 2
    return 1.0 / lam - dt * math.exp(-x) / (1.0 - math.exp(-x))


class _ModelRule(PlacementPolicy):
    """The model-only rule, as a policy object, so that it can be replayed as one of the experts."""

    name = SELF

    def __init__(self, owner: ExpectedCostPolicy) -> None:
        self.owner = owner

    def decide(self, state: DecisionState) -> Decision:
        return self.owner._model_decide(state, explain=False)


class ExpectedCostPolicy(PlacementPolicy):
    name = "expected-cost"

    def __init__(
        self,
        prior_up_hours: float = 1.0,
        prior_down_hours: float = 2.0,
        prior_weight: float = 0.5,
        bin_weight: float = 2.0,
        max_steps: int = 48,
        resolve_hours: float = 1.0,
        experts: bool = True,
        switch_overheads: float = 2.0,
        noise_fraction: float = 0.005,
        zone_prior_up_hours: tuple[float, ...] | None = None,
        band_priors: bool = False,
        move_margin: float = 0.0,
        od_start_margin: float = 1.0,
        poll_hours: float = DEFAULT_POLL_HOURS,
    ) -> None:
        """Defaults chosen on the tuning generator only (`launcher.simulation.synthetic`, seeds 0-14).
        `prior_*`: the spells assumed before any is seen, worth `prior_weight` spells (per zone,
        `zone_prior_up_hours` overrides the up spell; with `band_priors` the controller seeds each
        zone's from its offer's interruption band, `seed_prior`); `bin_weight`: how many hours of observation an hour of the day's rates
        lean on the zone's overall rates; `max_steps`: the DP's time steps to the deadline; `resolve_hours`: how
        often the DP is solved again; `experts`: replay greedy and uniform progress and follow the
        best when it is ahead by more than `switch_overheads` restarts at the on-demand price plus
        `noise_fraction` of the job's on-demand cost; `move_margin` / `od_start_margin`: in
        restarts at the on-demand price, what leaving the cluster held / starting on-demand while
        idle must save under the model (a point-estimate DP does not value what waiting teaches:
        near indifference it would give up the option of spot on estimates from a few spells)."""
        if min(prior_up_hours, prior_down_hours, prior_weight, bin_weight, resolve_hours, poll_hours) <= 0:
            raise ValueError("priors, weights, resolve_hours and poll_hours must be > 0")
        if max_steps < 4 or switch_overheads < 0 or noise_fraction < 0:
            raise ValueError("max_steps must be >= 4, switch_overheads and noise_fraction >= 0")
        if zone_prior_up_hours is not None and any(h <= 0 for h in zone_prior_up_hours):
            raise ValueError("zone_prior_up_hours must be > 0")
        self.prior_up_hours = prior_up_hours
        self.prior_down_hours = prior_down_hours
        self.prior_weight = prior_weight
        self.bin_weight = bin_weight
        self.max_steps = int(max_steps)
        self.resolve_hours = resolve_hours
        self.experts = experts
        self.switch_overheads = switch_overheads
        self.noise_fraction = noise_fraction
        self.move_margin = move_margin
        self.od_start_margin = od_start_margin
        self.zone_prior_up_hours = tuple(zone_prior_up_hours) if zone_prior_up_hours else None
        self.band_priors = band_priors  # the controller seeds each zone's prior from its band
        self._zone_priors: dict[int, float] = {}
        self.poll_hours = poll_hours
        self.reset()

    # ---- per-run state --------------------------------------------------------------------------
    def seed_prior(self, zone: int, up_hours: float) -> None:
        """A zone's prior mean up spell (from its offer's interruption band); kept across `reset`."""
        if up_hours <= 0:
            raise ValueError("a prior up spell must be > 0")
        self._zone_priors[zone] = up_hours

    def _model(self, z: int | None) -> ZoneModel:
        up = self.prior_up_hours
        if z is not None and self.zone_prior_up_hours and z < len(self.zone_prior_up_hours):
            up = self.zone_prior_up_hours[z]
        if z is not None and z in self._zone_priors:
            up = self._zone_priors[z]
        return ZoneModel(up, self.prior_down_hours, self.prior_weight, self.bin_weight)

    def reset(self) -> None:
        self.models: list[ZoneModel] = []
        self.any_model = self._model(None)  # "some zone has capacity" (multi-zone only)
        self._seeds: dict[int, ZoneHistory] = {}
        self.table: ValueTable | None = None
        self._table_zone = 0
        self._solved_at = -math.inf
        self._solves = 0
        self._pending = None  # a solve in progress (generator), advanced one chunk per decision instant
        self._pending_t = -math.inf
        self._pending_zone = 0
        self._memo: tuple | None = None  # (state key, scored actions) of the last model decision
        self._last_obs: float | None = None
        self.shadows: dict[str, ShadowRun] = {}
        if self.experts:
            self.shadows = {SELF: ShadowRun(_ModelRule(self)), "greedy": ShadowRun(GreedyPolicy(self.poll_hours)),
                            "uniform-progress": ShadowRun(UniformProgressPolicy(self.poll_hours))}  # fmt: skip
        self.leader = SELF
        self._last_key: tuple | None = None
        self._last_reason = ""

    def seed_history(self, zone: int, history: ZoneHistory) -> None:
        self._seeds[zone] = history

    # ---- observing --------------------------------------------------------------------------------
    def _observe(self, state: DecisionState) -> None:
        t = state.elapsed_hours
        seen = seen_capacity(state)
        avail = seen if self.multi_zone else (seen[state.current_zone],)
        while len(self.models) < len(avail):
            z = len(self.models)
            m = self._model(z)
            if z in self._seeds:
                m.seed(self._seeds[z])
            self.models.append(m)
        for m, up in zip(self.models, avail):
            if up is not None:
                m.observe(t, up)
        some = any_seen_up(avail)
        if some is not None:
            self.any_model.observe(t, some)
        self._last_obs = t

    def _zone_model(self, state: DecisionState, z: int) -> ZoneModel:
        return self.models[z if self.multi_zone else 0]

    def _avail_model(self) -> ZoneModel:
        return self.any_model if self.multi_zone else self.models[0]

    def _up(self, state: DecisionState) -> bool:
        return any(state.spot_available) if self.multi_zone else state.spot_available[state.current_zone]

    # ---- the model's step predictions ----------------------------------------------------------
    def _step_model(self, spot: ZoneModel, t: float, dt: float) -> StepModel:
        a = self._avail_model()
        h = int(t % HOURS_PER_DAY)
        s_up, s_up_half = a.survival(1, t, dt), a.survival(1, t, dt / 2)
        back, back_half = 1.0 - a.survival(0, t, dt), 1.0 - a.survival(0, t, dt / 2)
        surv = spot.survival(1, t, dt)
        al, be = spot.rate_posterior(1, h)
        mu = min(dt, max(0.0, _mean_up_if_preempted(al / be, dt)))
        q = 1.0 - spot.survival(0, t + mu, max(0.0, dt - mu))
        if self.multi_zone and len(self.models) > 1:
            u, d = a.mean_hours(1), a.mean_hours(0)
            q = max(q, u / (u + d))  # another zone may still have capacity
        al0, be0 = a.rate_posterior(0, h)
        back_at = min(dt, max(0.0, _mean_up_if_preempted(al0 / be0, dt)))
        rest = dt - back_at
        surv_rest = spot.survival(1, t + back_at, rest)
        mu_rest = min(rest, max(0.0, _mean_up_if_preempted(al / be, rest))) if rest > 0 else 0.0
        return StepModel(s_up + (1 - s_up) * back_half, back * s_up_half, surv, mu, q, back_at, surv_rest, mu_rest)

    def _best_zone(self, state: DecisionState, only_up: bool) -> int | None:
        """The zone whose spells are expected longest (among those with capacity now, if `only_up`);
        ties go to the zone held, then the lower index."""
        if not self.multi_zone:
            z = state.current_zone
            return z if (state.spot_available[z] or not only_up) else None
        zs = [z for z, a in enumerate(state.spot_available) if a or not only_up]
        if not zs:
            return None
        t = state.elapsed_hours

        def key(z: int) -> tuple:
            m = self.models[z]
            return (round(-math.log(max(m.survival(1, t, 1.0), 1e-300)), 9), z != state.current_zone, z)

        return min(zs, key=key)

    def _resolve(self, state: DecisionState, prices_: Prices) -> None:
        """Solve the DP again every `resolve_hours` in chunks of `SOLVE_CHUNK` steps, one chunk per
        decision instant, deciding on the last table meanwhile (so no decision waits for a whole
        solve); the first decision decides on a coarse table of `SOLVE_CHUNK` steps."""
        t = state.elapsed_hours
        if self._pending is not None:
            if t > self._pending_t:
                self._pending_t = t
                self._advance()
            return
        if self.table is not None and t - self._solved_at < self.resolve_hours - 1e-9:
            return
        z = self._best_zone(state, only_up=False) or 0
        spot = self._zone_model(state, z)
        left = max(0.0, state.deadline_hours - t)
        work = max(0.0, state.work_total_hours - state.work_done_hours)
        if left <= 0:
            self.table = None
            return
        model = lambda tt, dt: self._step_model(spot, tt, dt)  # noqa: E731
        first = self.table is None
        if first:  # the first decision: a coarse table now, the full one in chunks from the next instant
            self.table = solve(t, left, work, prices_, model, max_steps=min(SOLVE_CHUNK, self.max_steps))
            self._table_zone = z
        self._pending = solve_in_chunks(t, left, work, prices_, model, max_steps=self.max_steps, chunk=SOLVE_CHUNK)
        self._pending_t, self._pending_zone, self._solved_at = t, z, t
        if not first:
            self._advance()

    def _advance(self) -> None:
        try:
            next(self._pending)
        except StopIteration as done:
            self.table, self._table_zone = done.value, self._pending_zone
            self._pending = None
            self._solves += 1

    # ---- the model's rule -------------------------------------------------------------------------
    def _q(self, state: DecisionState, zone: int, prices_: Prices) -> dict[str, float] | None:
        tab = self.table
        if tab is None:
            return None
        t = state.elapsed_hours
        i = tab.next_index(t)
        dt = tab.t0 + i * tab.step - t
        if dt <= 1e-9:
            return None
        work = max(0.0, state.work_total_hours - state.work_done_hours)
        m = self._step_model(self._zone_model(state, zone), t, dt)
        return q_values(tab.v[i], tab.w, dt, m, prices_, state.overhead_remaining_hours, w=work)

    def _model_decide(self, state: DecisionState, explain: bool = True) -> Decision:
        z = state.current_zone
        if holding_spot(state):
            return Decision(Choice.SPOT, z, "exploit the live spot cluster")
        # The model-only rule's replay usually stands where the run stands: score the actions once.
        key = (state.elapsed_hours, state.work_done_hours, state.current, z, state.overhead_remaining_hours,
               state.spot_available, self._solves, self.table is None)  # fmt: skip
        if self._memo is not None and self._memo[0] == key:
            choice, zone, best, options, rz, held = self._memo[1]
        else:
            choice, zone, best, options, rz, held = self._score_actions(state)
            self._memo = (key, (choice, zone, best, options, rz, held))
        if options is None:
            return Decision(choice, zone, best)
        if not explain:
            return Decision(choice, zone, "")
        return Decision(choice, zone, self._explain(state, best, options, rz, held))

    def _score_actions(self, state: DecisionState) -> tuple:
        """(choice, zone, best action, options, zone named in the reason, held action); options None
        when the table has no step left (then `best` is the reason)."""
        z = state.current_zone
        od, sp = prices(state)
        p = Prices(od, sp, state.restart_overhead_hours)
        target = self._best_zone(state, only_up=True)
        up = target is not None
        q = self._q(state, target if up else (self._table_zone if self.multi_zone else z), p)
        if q is None:  # no grid step left before the deadline: the safety net decides
            if up:
                return Choice.SPOT, target, "spot available, deadline at hand", None, z, ""
            return Choice.ON_DEMAND, z, "deadline at hand: on-demand", None, z, ""
        on_od = state.current is Choice.ON_DEMAND
        if up:
            options = {"spot": q["spot_start"], "wait": q["wait_up"],
                       "on-demand": q["od_stay_up"] if on_od else q["od_start_up"]}  # fmt: skip
        else:
            options = {"wait": q["wait_down"], "on-demand": q["od_stay_down"] if on_od else q["od_start_down"]}
        held = "on-demand" if on_od else "wait"
        # Leaving the cluster held must pay by a margin (the model's estimates are noisy and a move
        # costs a restart for sure); so must a start of on-demand while waiting is still possible.
        bias = {k: 0.0 for k in options}
        restart = state.restart_overhead_hours * od
        for k in options:
            if on_od and k != "on-demand":
                bias[k] = self.move_margin * restart
            elif not on_od and k == "on-demand":
                bias[k] = self.od_start_margin * restart
        best = min(options, key=lambda k: (options[k] + bias[k], k != held))
        choice = {"spot": Choice.SPOT, "wait": Choice.NONE, "on-demand": Choice.ON_DEMAND}[best]
        zone = target if choice is Choice.SPOT else z
        return choice, zone, best, options, zone if up else z, held

    def _explain(self, state: DecisionState, best: str, options: dict[str, float], z: int, held: str) -> str:
        key = (best, z, self._solves)
        if key == self._last_key:
            return self._last_reason
        m = self._zone_model(state, z)
        others = {k: v for k, v in options.items() if k != best}
        alt = min(others, key=others.get) if others else best
        saves = others.get(alt, options[best]) - options[best]
        verb = {"spot": f"spot in zone {z}", "wait": "waiting", "on-demand": "on-demand"}[best]
        if best == held and best != "spot":
            verb = {"wait": "waiting on", "on-demand": "staying on on-demand"}[best]
        why = (f"zone {z}: expected up {m.mean_hours(1):.1f} h, down {m.mean_hours(0):.1f} h{m.cycle_text()}; "
               f"{verb} saves ${saves:.2f} over {alt} (expected ${options[best]:.2f} to finish)")  # fmt: skip
        self._last_key, self._last_reason = key, why
        return why

    # ---- experts --------------------------------------------------------------------------------
    def _score(self, name: str, state: DecisionState) -> float:
        """Paid so far + the model's expected cost to finish from where the expert would be."""
        sh = self.shadows[name]
        tab = self.table
        work = max(0.0, state.work_total_hours - sh.done)
        if tab is None or work <= 0:
            return sh.cost
        i = min(tab.n, max(0, math.floor((state.elapsed_hours - tab.t0) / tab.step + 0.5 + 1e-6)))
        up = self._up(state)
        if sh.held is Choice.SPOT and state.spot_available[min(sh.zone, len(state.spot_available) - 1)]:
            s = 2
        elif sh.held is Choice.ON_DEMAND:
            s = D1 if up else D0
        else:
            s = N1 if up else N0
        return sh.cost + tab.value(i, s, work)

    def _margin(self, state: DecisionState) -> float:
        od, _ = prices(state)
        return self.switch_overheads * state.restart_overhead_hours * od + self.noise_fraction * od * state.work_total_hours

    def _choose_leader(self, state: DecisionState) -> tuple[str, dict[str, float]]:
        scores = {n: self._score(n, state) for n in self.shadows}
        best = min(scores, key=lambda n: (scores[n], n != self.leader))
        if best != self.leader and scores[best] < scores[self.leader] - self._margin(state):
            self.leader = best
        return self.leader, scores

    def _follow(self, state: DecisionState, name: str, scores: dict[str, float]) -> Decision:
        sh = self.shadows[name]
        tag = (f"following {name}: replayed on the capacity seen it scores ${scores[name]:.0f} (paid + expected to "
               f"finish) against ${scores[SELF]:.0f} for the model's rule; the lead changes at ${self._margin(state):.2f}")
        if sh.held is Choice.SPOT and state.spot_available[sh.zone]:
            return Decision(Choice.SPOT, sh.zone, f"{tag} (spot in zone {sh.zone})")
        if sh.held is Choice.ON_DEMAND:
            return Decision(Choice.ON_DEMAND, state.current_zone, f"{tag} (on-demand)")
        return Decision(Choice.NONE, state.current_zone, f"{tag} (wait)")

    # ---- the decision -----------------------------------------------------------------------------
    def decide(self, state: DecisionState) -> Decision:
        state = snap_to_tick(state)
        z = state.current_zone
        self._observe(state)
        if state.deadline_hours is None:
            target = self._best_zone(state, only_up=True)
            if target is not None:
                return Decision(Choice.SPOT, target, "spot, no deadline")
            return Decision(Choice.NONE, z, "wait for spot, no deadline")
        b = budget(state, self.poll_hours)
        if b.remaining <= 0:
            return Decision(Choice.NONE, z, "done")
        od, sp = prices(state)
        self._resolve(state, Prices(od, sp, state.restart_overhead_hours))
        if self.shadows:
            for sh in self.shadows.values():
                sh.observe(state)
            leader, scores = self._choose_leader(state)
            if leader != SELF:
                return enforce(state, self._follow(state, leader, scores), b)
        return enforce(state, self._model_decide(state), b)


class ExpectedCostMultiZonePolicy(ExpectedCostPolicy):
    """The same rule over several zones: capacity is "some zone has capacity" (its own model), a
    spot start goes to the zone with capacity whose spells are expected longest."""

    name = "expected-cost-multi-zone"
    multi_zone = True
