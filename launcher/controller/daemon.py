"""`python -m launcher.controller.daemon RUN_ID`: a detached controller (`launch --detach`).

Its output goes to runs/<id>/controller.log; the job's output to runs/<id>/logs/.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from launcher.controller.states import state_text


def main(argv: list[str]) -> int:
    from launcher.controller.runner import run_controller
    from launcher.ledger import Ledger

    import os

    os.umask(0o077)  # private state even when started by hand with a loose umask
    run_id = argv[0]
    mode = argv[1] if len(argv) > 1 else "detached"

    def notify(msg: str) -> None:
        sys.stdout.write(f"{datetime.now(UTC):%H:%M:%S} {msg}\n")
        sys.stdout.flush()

    with Ledger() as ledger:
        result = run_controller(run_id, ledger, mode=mode, notify=notify)
    notify(f"run {run_id}: {state_text(result.state, result.end_reason)}")
    return 0 if result.state == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
