"""Two runs side by side: provenance, resources, cost, results and environment, each row marked
same or not. The environment section: the interpreter, the distributions' count and hash, then one
row per package that differs (version, and source revision for local installs)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from launcher import paths
from launcher.tracking.run_facts import PROVENANCE_FIELDS, end_numbers

SECTIONS = ("provenance", "resources", "cost", "results")
ENVIRONMENT = "environment"


@dataclass(frozen=True)
class DiffRow:
    section: str
    field: str
    a: Any
    b: Any

    @property
    def same(self) -> bool:
        return self.a == self.b


def run_facts(ledger, run) -> dict[str, dict[str, Any]]:
    """One run's comparable facts by section (values are plain JSON types)."""
    from launcher.tracking.reproduce import recorded_weights

    prov = {"spec_hash": run.spec_hash, **{f: getattr(run, f) for f in PROVENANCE_FIELDS}}
    attempts = ledger.attempts(run.run_id)
    last = attempts[-1] if attempts else None
    resources = _spec_resources(run.spec_yaml)
    if last is not None:
        resources.update({
            "cloud": last.cloud, "region": last.region, "instance_type": last.instance_type,
            "accelerator": last.accelerator, "accelerator_count": last.accelerator_count,
            "num_nodes": last.num_nodes, "spot": last.spot,
        })  # fmt: skip
    results: dict[str, Any] = {"state": run.state, "end_reason": run.end_reason,
                               "final_weights_sha256": recorded_weights(ledger, run.run_id)}  # fmt: skip
    results.update({f"last {k}": v for k, v in sorted(last_metrics(run.run_id).items())})
    return {"provenance": prov, "resources": resources, "cost": end_numbers(ledger, run.run_id), "results": results}


def diff_runs(ledger, a, b) -> list[DiffRow]:
    fa, fb = run_facts(ledger, a), run_facts(ledger, b)
    rows = []
    for section in SECTIONS:
        keys = list(dict.fromkeys([*fa[section], *fb[section]]))
        rows.extend(DiffRow(section, k, fa[section].get(k), fb[section].get(k)) for k in keys)
    return rows + environment_rows(ledger, a.run_id, b.run_id)


def environment_rows(ledger, a_id: str, b_id: str) -> list[DiffRow]:
    """The two recorded environments: summary rows, then each package that differs."""
    from launcher.environment import differences
    from launcher.tracking.lineage import recorded_environment

    ea, eb = recorded_environment(ledger, a_id), recorded_environment(ledger, b_id)
    if ea is None and eb is None:
        return []

    def summary(e):
        if e is None:
            return None, None, None
        return f"{e.implementation} {e.python}", len(e.distributions), e.distributions_hash

    (pa, na, ha), (pb, nb, hb) = summary(ea), summary(eb)
    rows = [DiffRow(ENVIRONMENT, "python", pa, pb), DiffRow(ENVIRONMENT, "distributions", na, nb),
            DiffRow(ENVIRONMENT, "distributions_hash", ha, hb)]  # fmt: skip
    if ea is not None and eb is not None:
        rows += [DiffRow(ENVIRONMENT, f"package {d.name}", d.recorded, d.here) for d in differences(ea, eb) if d.name != "python"]
    return rows


def _spec_resources(spec_yaml: str) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(spec_yaml) or {}
    except yaml.YAMLError:
        return {}
    res = data.get("resources") or {}
    out = {f"spec {k}": (v if isinstance(v, str | int | float | bool) or v is None else json.dumps(v, sort_keys=True)) for k, v in res.items()}
    out["spec num_nodes"] = data.get("num_nodes", 1)
    return out


def last_metrics(run_id: str) -> dict[str, float]:
    """The last value of each metric the job printed (from its log, when this machine has it)."""
    from launcher.tracking.metrics import parse_metric_line

    log = paths.runs_dir() / run_id / "logs" / "rank-0.log"
    out: dict[str, float] = {}
    if not log.is_file():
        return out
    with open(log, errors="replace") as f:
        for line in f:
            for p in parse_metric_line(line, 0):
                out[p.key] = p.value
    return out


def rows_json(rows: list[DiffRow], a, b) -> dict:
    return {
        "a": a.run_id, "b": b.run_id,
        "rows": [{"section": r.section, "field": r.field, "a": r.a, "b": r.b, "same": r.same} for r in rows],
        "differences": sum(1 for r in rows if not r.same),
    }  # fmt: skip
