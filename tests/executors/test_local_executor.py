"""The local executor for real: bash process groups, SkyPilot env vars per rank, logs, phases,
preemption exit code, clean stop."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from launcher.executors import PREEMPTED_EXIT_CODE, ExecRequest, Outcome
from launcher.executors.container import FORWARDER, ContainerRuntime
from launcher.executors.local import LocalExecutor, kill_recorded_processes, log_path
from launcher.providers.base import ClusterRequest
from launcher.providers.local import LocalProvider, PreemptionSchedule


# Unique per test process: the crash-cleanup test kills every process carrying this run id, so
# parallel workers (pytest -n) must not share one.
RUN_ID = f"r-test-{os.getpid()}"


def _request(tmp_path: Path, *, run: str | None, setup: str | None = None, num_nodes: int = 1, **kw) -> ExecRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(exist_ok=True)
    return ExecRequest(
        run_id=kw.pop("run_id", RUN_ID), attempt=kw.pop("attempt", 1), run_dir=run_dir, workdir=kw.pop("workdir", None),
        setup=setup, run=run, num_nodes=num_nodes, gpus_per_node=0,
        checkpoint_dir=run_dir / "checkpoints", **kw,
    )  # fmt: skip


def _start(req: ExecRequest):
    provider = LocalProvider()
    handle = provider.provision(ClusterRequest(cluster="c1", offer=provider.offer(), num_nodes=req.num_nodes, tags={}))
    return LocalExecutor(podman=False).start(req, handle)


def test_multi_rank_env_vars_and_logs(tmp_path):
    script = (
        'echo "rank=$SKYPILOT_NODE_RANK n=$SKYPILOT_NUM_NODES gpus=$SKYPILOT_NUM_GPUS_PER_NODE '
        'run=$LAUNCHER_RUN_ID attempt=$LAUNCHER_ATTEMPT ckpt=$LAUNCHER_CHECKPOINT_DIR '
        'master=$MASTER_ADDR:$MASTER_PORT task=$SKYPILOT_TASK_ID user=$MY_VAR"; '
        'printf "%s" "$SKYPILOT_NODE_IPS" > ips-$SKYPILOT_NODE_RANK.txt; command -v python > py-$SKYPILOT_NODE_RANK.txt'
    )
    wd = tmp_path / "wd"
    wd.mkdir()
    req = _request(tmp_path, run=script, num_nodes=3, workdir=wd, envs={"MY_VAR": "hello"})
    result = _start(req).wait(30)
    assert result is not None and result.outcome is Outcome.SUCCEEDED, result
    ports = set()
    for rank in range(3):
        line = log_path(req.run_dir, rank).read_text().strip()
        fields = dict(kv.split("=", 1) for kv in line.split())
        assert fields["rank"] == str(rank)
        assert fields["n"] == "3" and fields["gpus"] == "0" and fields["user"] == "hello"
        assert fields["run"] == RUN_ID and fields["attempt"] == "1"
        assert fields["ckpt"] == str(req.run_dir / "checkpoints")
        assert fields["task"] == f"{RUN_ID}-a1"
        ports.add(fields["master"])
        assert (wd / f"ips-{rank}.txt").read_text() == "127.0.0.1\n127.0.0.1\n127.0.0.1"
        # the job's `python` is this interpreter's (the venv that has torch)
        import sys

        assert Path((wd / f"py-{rank}.txt").read_text().strip()).parent == Path(sys.executable).parent
    assert len(ports) == 1 and ports.pop().startswith("127.0.0.1:")  # one rendezvous for all ranks


def test_setup_failure_is_reported_as_setup_and_run_never_starts(tmp_path):
    req = _request(tmp_path, setup="echo setting-up; exit 7", run="echo SHOULD-NOT-RUN")
    result = _start(req).wait(30)
    assert result.outcome is Outcome.SETUP_FAILED
    assert result.exit_code == 7 and result.phase == "setup"
    log = log_path(req.run_dir, 0).read_text()
    assert "setting-up" in log and "SHOULD-NOT-RUN" not in log


def test_setup_then_run_in_order(tmp_path):
    req = _request(tmp_path, setup="echo one", run="echo two", num_nodes=2)
    assert _start(req).wait(30).outcome is Outcome.SUCCEEDED
    assert log_path(req.run_dir, 1).read_text().split() == ["one", "two"]


def test_one_failing_rank_fails_the_job_and_stops_its_peers(tmp_path):
    req = _request(tmp_path, run='if [ "$SKYPILOT_NODE_RANK" = 1 ]; then exit 3; fi; sleep 60', num_nodes=2)
    result = _start(req).wait(30)
    # Rank 0 sleeps 60 s: that wait(30) returned a result at all means it was stopped, and its
    # own exit says by whom (our SIGTERM), not by its sleep ending.
    assert result is not None and result.outcome is Outcome.FAILED and result.exit_code == 3
    assert result.detail == "rank 1 run exited with 3"
    assert {r.rank: r.exit_code for r in result.ranks} == {0: 128 + signal.SIGTERM, 1: 3}


def test_job_exiting_with_the_preemption_code_is_preempted(tmp_path):
    req = _request(tmp_path, run=f"exit {PREEMPTED_EXIT_CODE}")
    result = _start(req).wait(30)
    assert result.outcome is Outcome.PREEMPTED and result.exit_code == PREEMPTED_EXIT_CODE


def test_preemption_notice_delivers_sigterm_and_job_can_checkpoint(tmp_path):
    script = f"trap 'echo saved > ckpt.txt; exit {PREEMPTED_EXIT_CODE}' TERM; echo started; while true; do sleep 0.05; done"
    wd = tmp_path / "wd"
    wd.mkdir()
    req = _request(tmp_path, run=script, workdir=wd)
    ex = _start(req)
    _wait_for_text(log_path(req.run_dir, 0), "started")
    ex.notify_preemption(grace_s=5)
    result = ex.wait(10)
    assert result.outcome is Outcome.PREEMPTED and result.exit_code == PREEMPTED_EXIT_CODE
    assert (wd / "ckpt.txt").read_text().strip() == "saved"


def test_stop_escalates_to_sigkill_after_grace_and_kills_the_whole_group(tmp_path):
    # The job ignores SIGTERM and has a background child; both must be gone after stop().
    script = "trap '' TERM; sleep 300 & echo $! > child.pid; echo started; wait"
    wd = tmp_path / "wd"
    wd.mkdir()
    req = _request(tmp_path, run=script, workdir=wd)
    ex = _start(req)
    _wait_for_text(log_path(req.run_dir, 0), "started")
    child = int((wd / "child.pid").read_text())
    result = ex.stop(grace_s=0.5)
    # It ignored SIGTERM, so only the escalation can have ended it: killed by SIGKILL.
    assert result.outcome is Outcome.CANCELLED
    assert [r.exit_code for r in result.ranks] == [128 + signal.SIGKILL]
    _assert_dead(child)


def test_kill_recorded_processes_after_controller_loss(tmp_path):
    req = _request(tmp_path, run="echo started; sleep 300")
    ex = _start(req)
    _wait_for_text(log_path(req.run_dir, 0), "started")
    pgids = ex.process_groups
    assert json.loads((req.run_dir / "procs.json").read_text())["procs"][0]["pgid"] == pgids[0]
    # A fresh process (as `launcher down` would be) only has the file to go by.
    assert kill_recorded_processes(req.run_dir, grace_s=2) == list(pgids)
    assert ex.wait(10).exit_code == 128 + signal.SIGTERM
    assert json.loads((req.run_dir / "procs.json").read_text())["procs"] == []


def test_recorded_pid_reused_by_another_process_is_not_killed(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "procs.json").write_text(json.dumps({"procs": [{"pgid": os.getpgrp(), "start_ticks": 1}]}))
    assert kill_recorded_processes(run_dir, grace_s=0.1) == []  # we are still alive


def test_container_command_line_passes_variables_by_name_only():
    rt = ContainerRuntime("podman", "/usr/bin/podman", "localhost/img:1", ("--runtime", "runc", "--init"), True)
    argv = rt.run_argv("python train.py", name="n1", env_names=["A", "SKYPILOT_NODE_RANK"], workdir=Path("/w"), mounts=[Path("/w"), Path("/ck"), Path("/w")])
    assert argv[:2] == ["/usr/bin/podman", "run"]
    assert argv[argv.index("--runtime") + 1] == "runc" and "--init" in argv
    assert argv[argv.index("--ulimit") + 1] == "nofile=1024:1024"
    assert argv[argv.index("--pull") + 1] == "never"
    assert argv.count("-v") == 2 and ["-v", "/ck:/ck"] == argv[argv.index("/ck:/ck") - 1 : argv.index("/ck:/ck") + 1]
    assert ["-e", "A", "-e", "SKYPILOT_NODE_RANK"] == argv[argv.index("-e") : argv.index("-e") + 4]
    assert not any("=" in a for a in argv[: argv.index("localhost/img:1")] if a.startswith(("A", "SKY")))
    assert argv[-6:] == ["localhost/img:1", "sh", "-c", FORWARDER, "launcher-job", "python train.py"]


def test_image_with_containers_off_runs_on_host_and_says_so(tmp_path):
    req = _request(tmp_path, run="echo hi", image_id="docker:ubuntu")
    result = _start(req).wait(30)
    assert result.outcome is Outcome.SUCCEEDED and result.image_runtime == "host"


def test_preemption_schedule_parsing():
    assert PreemptionSchedule.parse("5,12.5").delays_s == (5.0, 12.5)
    a, b = PreemptionSchedule.parse("3", seed=1, horizon_s=30), PreemptionSchedule.parse("3", seed=1, horizon_s=30)
    assert a == b and len(a.delays_s) == 3 and all(0 < d <= 30 for d in a.delays_s)
    assert PreemptionSchedule.parse("3", seed=2, horizon_s=30) != a
    with pytest.raises(ValueError):
        PreemptionSchedule.parse("soon")
    with pytest.raises(ValueError):
        PreemptionSchedule.parse("0,-1")


def test_local_provider_announces_scheduled_preemptions_per_attempt():
    p = LocalProvider(PreemptionSchedule((2.0,)))
    assert p.offer().spot is True and p.offer().price_usd_per_hour == 0.0
    h1 = p.provision(ClusterRequest(cluster="c1", offer=p.offer(), num_nodes=2, tags={}))
    assert [n.rank for n in h1.nodes] == [0, 1] and {n.ip for n in h1.nodes} == {"127.0.0.1"}
    assert p.preemption_notice(h1, 1.9) is None
    assert "after 2s" in p.preemption_notice(h1, 2.0)
    p.terminate(h1)
    p.terminate(h1)  # idempotent
    h2 = p.provision(ClusterRequest(cluster="c2", offer=p.offer(), num_nodes=1, tags={}))
    assert p.preemption_notice(h2, 1e6) is None  # second placement runs to completion
    assert LocalProvider().offer().spot is False


def _wait_for_text(path: Path, text: str, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def _assert_dead(pid: int, timeout_s: float = 5) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # a zombie (not reaped by its dead parent) counts as dead
        try:
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} is still alive")


def test_run_processes_are_found_by_their_run_id_without_procs_json(tmp_path):
    req = _request(tmp_path, run="echo started; sleep 300", num_nodes=2)
    ex = _start(req)
    _wait_for_text(log_path(req.run_dir, 1), "started")
    (req.run_dir / "procs.json").unlink()  # as if the controller died before writing it
    assert sorted(kill_recorded_processes(req.run_dir, grace_s=2, run_id=RUN_ID)) == sorted(ex.process_groups)
    assert ex.wait(10).outcome is Outcome.FAILED  # killed by SIGTERM (143), not our doing


def test_file_mounts_link_local_sources_into_the_job_dir(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.txt").write_text("payload")
    wd = tmp_path / "wd"
    wd.mkdir()
    req = _request(
        tmp_path, run="cat mnt/x.txt; cat home-data/x.txt", workdir=wd,
        file_mounts={"mnt": str(data), "~/home-data": str(data), "/abs/data": str(data), "bucket": "s3://b/p"},
    )  # fmt: skip
    ex = _start(req)
    assert ex.wait(30).outcome is Outcome.SUCCEEDED
    assert log_path(req.run_dir, 0).read_text() == "payloadpayload"
    assert sorted(ex.mounts_skipped) == ["/abs/data", "bucket"] and not Path("/abs/data").exists()


def test_spot_trace_replay_and_local_provider_capacity(tmp_path):
    from launcher.errors import ProviderError
    from launcher.providers.local import SpotTrace

    f = tmp_path / "trace.json"
    f.write_text('{"metadata": {"gap_seconds": 60}, "data": [0, 0, 1, 0]}')
    trace = SpotTrace.load(f, speedup=60)  # one tick per second
    assert [trace.available_at(s) for s in (0, 1.5, 2.0, 2.9, 3.0, 99)] == [True, True, False, False, True, True]
    now = [0.0]
    p = LocalProvider(trace=trace, clock=lambda: now[0])
    assert p.offer().spot is True
    h = p.provision(ClusterRequest(cluster="c1", offer=p.offer(), num_nodes=1, tags={}))
    assert p.preemption_notice(h, 1.0) is None
    now[0] = 2.5
    assert "tick 2" in p.preemption_notice(h, 2.5)
    with pytest.raises(ProviderError, match="no spot capacity"):
        p.provision(ClusterRequest(cluster="c2", offer=p.offer(), num_nodes=1, tags={}))
    now[0] = 3.2
    p.provision(ClusterRequest(cluster="c3", offer=p.offer(), num_nodes=1, tags={}))
    for bad in ('{"data": [0]}', '{"metadata": {"gap_seconds": 0}, "data": [0]}', "nope"):
        f.write_text(bad)
        with pytest.raises(ValueError, match="spot trace"):
            SpotTrace.load(f)


def test_waiting_wakes_when_a_rank_exits_not_at_the_end_of_the_tick(tmp_path):
    """The wait between polls ends as soon as a running rank exits (pidfd), so a long tick does
    not hold back a finished job; with nothing left running it is a plain sleep."""
    execution = _start(_request(tmp_path, run="sleep 0.3", num_nodes=2))
    t0 = time.monotonic()
    execution._sleep_until_an_exit(60.0)  # both ranks end after ~0.3 s; the tick would be 60 s
    assert time.monotonic() - t0 < 30.0
    result = execution.wait(30)
    assert result is not None and result.outcome is Outcome.SUCCEEDED
    t0 = time.monotonic()
    execution._sleep_until_an_exit(0.05)  # nothing running: sleeps its tick
    assert time.monotonic() - t0 >= 0.05
