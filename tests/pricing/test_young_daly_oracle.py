"""Young/Daly near-optimality against an independent oracle: a Monte-Carlo simulation of the
checkpoint/restart process itself (exponential failure times drawn, work and restarts played
out), searched over a grid of intervals. Nothing here calls the ranking model's formula."""

import math

import numpy as np
import pytest

from pricing.rank import expected_time


def simulated_mean_wall_hours(lam: float, W: float, tau: float, C: float, R: float, runs: int, seed: int) -> float:
    """Play the process out for `runs` jobs: segments of `tau` hours of work, each followed by a
    checkpoint of C hours (the last segment holds the rest of the work and no checkpoint); a
    failure (exponential, rate lam) loses the segment in progress and costs R to restart."""
    rng = np.random.default_rng(seed)
    n_full = int(math.floor(W / tau + 1e-9))
    rest = W - n_full * tau
    lengths = [tau + C] * n_full + ([rest] if rest > 1e-9 else [])
    if lengths and rest <= 1e-9:
        lengths[-1] = tau  # the final segment needs no checkpoint after it
    wall = np.zeros(runs)
    for seg in lengths:
        pending = np.ones(runs, dtype=bool)
        while pending.any():
            k = int(pending.sum())
            fail_at = rng.exponential(1.0 / lam, k)
            ok = fail_at >= seg
            idx = np.flatnonzero(pending)
            wall[idx[ok]] += seg
            wall[idx[~ok]] += fail_at[~ok] + R
            pending[idx[ok]] = False
    return float(wall.mean())


@pytest.mark.parametrize(
    ("lam", "W", "C", "R", "tolerance"),
    [
        (0.05, 100.0, 0.05, 0.1, 0.01),  # rare interruptions: first-order Young/Daly is within 1%
        (0.3, 20.0, 0.05, 0.1, 0.02),  # frequent ones: still within 2%
    ],
)
def test_young_daly_interval_is_near_the_simulated_best(lam, W, C, R, tolerance):
    tau_yd = math.sqrt(2 * C / lam)  # written out here: the Young/Daly interval
    t = expected_time(lam, W, checkpoint_cost_hours=C, restart_hours=R)
    assert t.checkpoint_hours[0] == pytest.approx(tau_yd)
    runs, seed = 4000, 11
    grid = np.geomspace(tau_yd / 6, tau_yd * 6, 24)  # even: Young/Daly itself is not a grid point
    sims = [simulated_mean_wall_hours(lam, W, g, C, R, runs, seed) for g in grid]
    best = int(np.argmin(sims))
    assert 0 < best < len(grid) - 1, "the search must bracket the optimum"
    at_yd = simulated_mean_wall_hours(lam, W, tau_yd, C, R, runs, seed)
    assert at_yd <= min(sims) * (1 + tolerance)
    # and far from it costs clearly more: the search can tell intervals apart
    assert max(sims[0], sims[-1]) > min(sims) * (1 + 2 * tolerance)
