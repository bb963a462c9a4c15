"""The controller: a small state machine that drives a run through attempts and recovery.

    from launcher.controller.controller import Controller, ControllerDeps, RunJob
    result = Controller(job, ControllerDeps(ledger, provider_for, executor_for, policy)).run()

Modules: states (transitions), controller (attempt loop), recovery (policy lookup + fallback),
liveness (orphan detection), cleanup (down / abandon), runner (run dir, detach, resume),
logs (tailing rank logs), daemon (detached entry point), checkpoint_watch (the job's new
checkpoints, recorded as ledger events). Import the module you need; this
package file stays empty so light modules (recovery, states) do not pull in the ledger.

Crash story: a `launch` killed with kill -9 leaves a live run whose controller pid is gone;
`launcher status` shows it as orphaned, `launcher down RUN` cleans it up, and
`launch --resume RUN` continues it (the open attempt is closed as `abandoned`, the next one
resumes from the last checkpoint).
"""
