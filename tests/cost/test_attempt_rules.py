"""The attempt cost rules are written once (launcher/cost/attempts.py) and run on two namespaces:
numpy arrays for reports and plain Python floats (launcher.cost.scalar_xp) for the rollup. The
scalar namespace follows numpy's NaN semantics, and one attempt through the scalar path gives the
same floats, bit for bit, as its row of the vectorized path, bucket by bucket. Importing the
rollup imports no numpy (a real subprocess)."""

import math
import random
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from launcher.cost import scalar_xp
from launcher.cost.attempts import AttemptColumns, billed_intervals, one_attempt, one_bucket, segments
from tests.conftest import REPO

NAN = math.nan
VALUES = (NAN, -1.5, 0.0, 2.0, 7.25, math.inf, -math.inf)


def same(a: float, b: float) -> bool:
    return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))


@pytest.mark.parametrize("op", ["maximum", "minimum", "fmax"])
def test_the_scalar_namespace_has_numpys_nan_semantics(op):
    for a in VALUES:
        for b in VALUES:
            assert same(getattr(scalar_xp, op)(a, b), float(getattr(np, op)(a, b))), (op, a, b)
    for x in VALUES:
        assert scalar_xp.isnan(x) == bool(np.isnan(x))
        for lo, hi in ((0.0, 2.0), (-1.5, 7.25), (2.0, 2.0)):
            assert same(scalar_xp.clip(x, lo, hi), float(np.clip(x, lo, hi))), (x, lo, hi)
    assert scalar_xp.where(True, 1.0, 2.0) == 1.0 and scalar_xp.where(False, 1.0, 2.0) == 2.0


@dataclass(frozen=True)
class Att:
    started_at: float
    ended_at: float | None
    billed_seconds: float | None
    teardown_at: float | None
    num_nodes: float
    price_usd_per_hour: float
    on_demand_price_usd_per_hour: float | None
    seq: int
    overhead_s: float | None
    resume_at: float | None
    last_ckpt_at: float | None
    preempted: bool
    prices: tuple[tuple[float, float], ...] = ()


def random_attempts(seed: int, n: int) -> list[Att]:
    rng = random.Random(seed)

    def maybe(p: float, v: float) -> float | None:
        return v if rng.random() < p else None

    out = []
    for _ in range(n):
        t = 1_793_059_200.0 + rng.uniform(0, 86400 * 3)
        dur = 0.0 if rng.random() < 0.1 else rng.uniform(60, 40 * 3600)
        changes = sorted((t + rng.uniform(-3600, dur + 7200), round(rng.uniform(0.2, 5), 4))
                         for _ in range(rng.choice([0, 0, 1, 3, 11])))  # fmt: skip
        out.append(Att(
            t, t + dur, maybe(0.3, rng.uniform(-100, dur + 3600)), maybe(0.4, t + dur + rng.uniform(-600, 7200)),
            float(rng.choice([1, 2, 4])), rng.uniform(0.1, 12), maybe(0.7, rng.uniform(1, 12)), rng.randint(1, 3),
            maybe(0.4, rng.uniform(-60, 1800)), maybe(0.5, t + rng.uniform(-60, dur + 60)),
            maybe(0.5, t + rng.uniform(-600, dur + 600)), rng.random() < 0.5, tuple(changes),
        ))  # fmt: skip
    return out


def opt(v: float | None) -> float:
    return NAN if v is None else v


def test_one_attempt_gives_its_row_of_the_vectorized_rules_bit_for_bit():
    atts = random_attempts(3, 400)
    cols = AttemptColumns(**{
        name: np.array([opt(getattr(a, name)) for a in atts], dtype="float64")
        for name in ("started_at", "ended_at", "billed_seconds", "teardown_at", "num_nodes", "price_usd_per_hour",
                     "on_demand_price_usd_per_hour", "overhead_s", "resume_at", "last_ckpt_at")
    }, seq=np.array([a.seq for a in atts]), preempted=np.array([a.preempted for a in atts]))  # fmt: skip
    changes = {i: (np.array([t for t, _ in a.prices]), np.array([p for _, p in a.prices])) for i, a in enumerate(atts) if a.prices}
    iv = billed_intervals(cols, changes, as_of=NAN)
    gpus = np.array([float(1 + i % 8) for i in range(len(atts))])
    edges = np.arange(1_793_059_200.0, 1_793_059_200.0 + 86400 * 6, 3 * 3600.0)  # 3-hour buckets
    rows, bucket, m = segments(iv, cols.num_nodes, cols.price_usd_per_hour, edges, gpus, changes)
    checked = 0
    for k, (i, b) in enumerate(zip(rows.tolist(), bucket.tolist())):
        one = one_attempt(atts[i])
        assert same(one.bill_end, iv.bill_end[i]) and same(one.rate_usd_per_hour, iv.rate_usd_per_hour[i])
        assert same(one.loss_start, iv.loss_start[i]) and same(one.overhead_end, iv.overhead_end[i])
        assert same(one.list_rate_usd_per_hour, iv.list_rate_usd_per_hour[i])
        cost, bm = one_bucket(one, float(edges[b]), float(edges[b + 1]), float(gpus[i]))
        assert same(cost, m["x_ComputeCost"][k]), (i, b)
        for ours, theirs in (("list_compute_usd", "ListComputeCost"), ("node_hours", "x_NodeHours"),
                             ("gpu_hours", "x_GpuHours"), ("restart_overhead_usd", "x_RestartOverheadCost"),
                             ("preemption_loss_usd", "x_PreemptionLossCost"), ("idle_usd", "x_IdleCost")):
            assert same(getattr(bm, ours), m[theirs][k]), (i, b, ours)
        assert int(bool(bm.preempted)) == m["x_Preemptions"][k]
        checked += 1
    assert checked > 400  # attempts crossing several buckets, zero-length ones in one
    assert m["x_Preemptions"].sum() > 0 and m["x_PreemptionLossCost"].sum() > 0 and m["x_RestartOverheadCost"].sum() > 0


def test_the_rollup_imports_no_numpy():
    probe = "import sys, launcher.ledger.rollup; print(sorted(m for m in ('numpy', 'pandas') if m in sys.modules))"
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == "[]"
