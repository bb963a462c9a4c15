"""Inspect a checkpoint store: `python -m launcher.checkpoint ls|latest|repair URL`.

`ls` lists committed checkpoints (newest first) and, with --verify, whether their files match
the manifest; `latest` prints the newest valid one; `repair` deletes unfinished and torn ones
(only while no job is writing to the store). Output is JSON."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from launcher.checkpoint.store import Checkpoint, CheckpointCorruptError, CheckpointStore
from launcher.errors import LauncherError


def _summary(c: Checkpoint) -> dict:
    d = asdict(c)
    d["size_bytes"] = sum(f.size_bytes for f in c.files)
    d["files"] = [f.name for f in c.files]
    return d


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m launcher.checkpoint", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=("ls", "latest", "repair"))
    p.add_argument("url")
    p.add_argument("--verify", action="store_true", help="ls: read every file and check it")
    args = p.parse_args(argv)
    try:
        store = CheckpointStore(args.url, keep_last=None)
        if args.command == "ls":
            rows = []
            for c in store.checkpoints():
                row = _summary(c)
                if args.verify:
                    try:
                        store.load(c)
                        row["valid"] = True
                    except CheckpointCorruptError as exc:
                        row["valid"], row["error"] = False, str(exc)
                rows.append(row)
            print(json.dumps(rows, indent=1))
        elif args.command == "latest":
            latest = store.latest(repair=False)
            print(json.dumps(_summary(latest) if latest else None, indent=1))
            return 0 if latest else 7
        else:
            print(json.dumps({"deleted": store.repair()}, indent=1))
    except LauncherError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
