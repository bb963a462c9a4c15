"""kill -9 of a real saving process (tests/checkpoint/saver_loop.py) against S3 (moto_server) and
GCS (gcp-storage-emulator): after every kill the next resume loads a valid checkpoint with exactly
the content saved for its step, progress never goes back, and some kills provably landed inside a
save (objects of a checkpoint without its manifest were left behind). Fewer kills than the local
test's 32: each start of the saver pays an interpreter, boto3/google-cloud imports and uploads.
The kill times are random: when the first 8 happen to miss every save (a loaded machine), it
goes on killing, up to 24, until one lands inside a save."""

from __future__ import annotations

import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from launcher.checkpoint import CheckpointStore
from launcher.checkpoint.manifest import MANIFEST_NAME

from tests.checkpoint.saver_loop import content

ITERATIONS = 8  # kills at least
MAX_ITERATIONS = 24  # more only until one kill has provably landed inside a save
SAVER = Path(__file__).parent / "saver_loop.py"


def kill_saver_repeatedly(url: str, keys: Callable[[], list[str]]) -> None:
    """`keys`: every object key under the store's prefix, relative to it (read with the test's
    own client, not through the store under test)."""
    rng = random.Random(4321)
    last_step, killed_mid_save, saves_seen, kills = -1, 0, 0, 0
    while kills < ITERATIONS or (not killed_mid_save and kills < MAX_ITERATIONS):
        kills += 1
        proc = subprocess.Popen([sys.executable, str(SAVER), url], stdout=subprocess.PIPE, text=True, bufsize=1)
        assert proc.stdout.readline().startswith("resumed ")  # kill after the start-up repair
        # Wait for one save to finish (saves over HTTP take a while on a loaded machine), then
        # kill at a random moment inside the following ones.
        assert proc.stdout.readline().startswith("saved "), "the saver never finished a save"
        saves_seen += 1
        time.sleep(rng.uniform(0.0, 1.0))
        proc.kill()
        proc.wait()
        proc.stdout.close()

        by_checkpoint: dict[str, set[str]] = {}
        for key in keys():
            ckpt, _, name = key.partition("/")
            by_checkpoint.setdefault(ckpt, set()).add(name)
        killed_mid_save += any(MANIFEST_NAME not in names for names in by_checkpoint.values())

        loaded = CheckpointStore(url).restore(repair=False)
        assert loaded is not None, "a committed checkpoint vanished after kill -9"
        assert loaded.step >= last_step
        assert loaded.files == content(loaded.step)
        last_step = loaded.step
    assert saves_seen == kills and last_step >= kills - 1  # at least one new save per start
    assert killed_mid_save >= 1, "no kill landed inside a save: this run proved nothing about torn saves"


def test_kill_dash_9_during_s3_saves(aws_env):
    import boto3

    client = boto3.client("s3", region_name="us-east-1")
    bucket = f"ckpt-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)

    def keys() -> list[str]:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="job/")
        return [o["Key"].removeprefix("job/") for page in pages for o in page.get("Contents", [])]

    kill_saver_repeatedly(f"s3://{bucket}/job", keys)


def test_kill_dash_9_during_gcs_saves(gcs_env):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="test", credentials=AnonymousCredentials())
    bucket = client.create_bucket(f"ckpt-{uuid.uuid4().hex[:8]}")

    def keys() -> list[str]:
        return [b.name.removeprefix("job/") for b in client.list_blobs(bucket.name, prefix="job/")]

    kill_saver_repeatedly(f"gs://{bucket.name}/job", keys)

