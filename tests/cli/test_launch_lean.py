"""A local `launch` imports only what it uses: no pandas to price a free run, no Alembic when the
ledger is already at head, no other command's module (real subprocesses, as a user runs it)."""

import subprocess
import sys

from tests.conftest import REPO

SPEC = "name: lean\nresources: {cpus: 1}\nrun: echo hi\nlauncher: {project: lean, expected_hours: 0.01}\n"
HEAVY = ("pandas", "pyarrow", "alembic", "sky", "pulumi", "boto3", "torch", "mlflow")
PROBE = (
    "import sys\n"
    "from launcher.cli.main import run\n"
    "rc = run(sys.argv[1:])\n"
    f"heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
    "cmds = sorted(m for m in sys.modules if m.startswith('launcher.cli.') and m.endswith('_cmd'))\n"
    "print('RC', rc, 'HEAVY', heavy, 'COMMANDS', cmds, file=sys.stderr)\n"
)


def _launch(spec, env=None):
    p = subprocess.run([sys.executable, "-c", PROBE, "launch", str(spec), "--yes"], capture_output=True, text=True,
                       cwd=REPO, env=env, timeout=120)  # fmt: skip
    return p, p.stderr.strip().splitlines()[-1]


def test_local_launch_imports_neither_pandas_nor_alembic_once_the_ledger_exists(tmp_path, launcher_home):
    spec = tmp_path / "t.yaml"
    spec.write_text(SPEC)
    first, probe = _launch(spec)
    assert first.returncode == 0, first.stderr[-2000:]
    # the first launch creates the ledger: migrating it is Alembic's job, pricing a free run is not pandas'
    assert probe.startswith("RC 0 HEAVY ['alembic'] COMMANDS ['launcher.cli.launch_cmd']"), probe
    assert (launcher_home / "ledger.db").is_file()
    again, probe = _launch(spec)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout == "hi\n"
    assert probe == "RC 0 HEAVY [] COMMANDS ['launcher.cli.launch_cmd']"
    assert "succeeded (completed), 1 attempt(s), cost $0.0000" in again.stderr


LIGHT_PROBE = (
    "import gc, json, sys\n"
    "from launcher.cli.main import run\n"
    "rc = run(sys.argv[1:], own_process=True)\n"
    "mods = ('launcher.checkpoint', 'argparse', 'alembic', 'sqlalchemy.dialects.postgresql', 'sqlalchemy.orm')\n"
    "from launcher.planning.budget import BudgetsConfig\n"
    "from launcher.clusters.models import ClustersFile\n"
    "from launcher.server.settings import UserConfig\n"
    "print(json.dumps({'rc': rc, 'imported': sorted(m for m in mods if m in sys.modules),\n"
    "    'built': sorted(m.__name__ for m in (BudgetsConfig, ClustersFile, UserConfig) if m.__pydantic_complete__),\n"
    "    'gc': gc.isenabled()}), file=sys.stderr)\n"
)


def test_a_plain_local_launch_loads_no_checkpoint_store_and_builds_no_optional_config_schema(tmp_path, launcher_home):
    """No budgets.yaml, clusters.yaml or config.yaml and a job that saves no checkpoint: their
    schemas and the checkpoint package stay unloaded. The collector, held off while the launch
    starts in its own process, is on again: the foreground controller released it."""
    import json

    spec = tmp_path / "t.yaml"
    spec.write_text(SPEC)
    first, _ = _launch(spec)
    assert first.returncode == 0, first.stderr[-2000:]
    p = subprocess.run([sys.executable, "-c", LIGHT_PROBE, "launch", str(spec), "--yes"], capture_output=True, text=True,
                       cwd=REPO, timeout=120)  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == "hi\n"
    facts = json.loads(p.stderr.strip().splitlines()[-1])
    assert facts == {"rc": 0, "imported": [], "built": [], "gc": True}
    assert (launcher_home / "runs").is_dir()
    runs = list((launcher_home / "runs").iterdir())
    assert len(runs) == 2 and all((r / "checkpoints").is_dir() for r in runs)
