"""CheckpointStore against real object-store servers: moto_server (S3) and gcp-storage-emulator (GCS)."""

from __future__ import annotations

import uuid

import pytest

from launcher.checkpoint import CheckpointStore
from launcher.checkpoint.manifest import MANIFEST_NAME
from launcher.checkpoint.storage import Storage, open_storage


def payload(step: int) -> dict[str, bytes]:
    return {"state.pt": bytes(range(256)) * (10 + step), "progress.json": f'{{"step": {step}}}'.encode()}


class Recording(Storage):
    def __init__(self, inner: Storage) -> None:
        self.inner, self.url, self.puts = inner, inner.url, []

    def put(self, key, data):
        self.inner.put(key, data)
        self.puts.append(key)

    def get(self, key):
        return self.inner.get(key)

    def list(self, prefix=""):
        return self.inner.list(prefix)

    def delete(self, key):
        self.inner.delete(key)


def exercise_object_store(url: str, raw_delete, raw_put) -> None:
    """The same behaviour on every backend: commit order, keep-last-N, torn objects skipped."""
    recording = Recording(open_storage(url))
    store = CheckpointStore(recording, keep_last=2)
    assert store.latest() is None
    first = store.save(1, payload(1))
    assert recording.puts[-1] == f"{first.checkpoint_id}/{MANIFEST_NAME}"  # manifest = commit point
    assert {k.rsplit("/", 1)[-1] for k in recording.puts[:-1]} == set(payload(1))

    saved = [first] + [store.save(s, payload(s)) for s in (2, 3)]
    assert [c.step for c in store.checkpoints()] == [3, 2]  # keep_last=2 pruned step 1
    assert not [k for k in recording.list() if k.startswith(first.checkpoint_id)]
    fresh = CheckpointStore(url)  # a new process: only the URL in common
    loaded = fresh.restore(repair=False)
    assert loaded is not None and loaded.step == 3 and loaded.files == payload(3)

    # Newest loses a data object (upload died after the manifest? bucket lifecycle?): skipped.
    raw_delete(f"{saved[2].checkpoint_id}/state.pt")
    assert fresh.latest(repair=False).step == 2
    assert fresh.latest(verify="size").step == 2  # the cheap check sees a missing object too
    # Newest-but-one gets corrupted bytes of the right size: nothing valid is left.
    data = bytearray(payload(2)["state.pt"])
    data[5] ^= 1
    raw_put(f"{saved[1].checkpoint_id}/state.pt", bytes(data))
    assert fresh.latest(repair=False) is None
    assert fresh.latest(verify="size").step == 2  # documented limit: same-size damage needs "content"
    # A truncated object is seen by the size check.
    raw_put(f"{saved[1].checkpoint_id}/state.pt", bytes(data[:-1]))
    assert fresh.latest(verify="size") is None
    # A data object without a manifest (upload killed before the commit) is never a checkpoint.
    raw_put("ckpt-000000000009-abc/state.pt", payload(9)["state.pt"])
    assert fresh.restore() is None
    assert [k for k in recording.list() if k.startswith("ckpt-")] == []  # repair removed all three


@pytest.fixture
def s3_bucket(aws_env):
    import boto3

    name = f"ckpt-{uuid.uuid4().hex[:8]}"
    client = boto3.client("s3", region_name="us-east-1")
    client.create_bucket(Bucket=name)
    return client, name


def test_s3_store_against_moto_server(s3_bucket):
    client, bucket = s3_bucket
    prefix = "team/job-1"
    exercise_object_store(
        f"s3://{bucket}/{prefix}",
        raw_delete=lambda key: client.delete_object(Bucket=bucket, Key=f"{prefix}/{key}"),
        raw_put=lambda key, data: client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data),
    )
    # The store stays inside its prefix: a neighbour's object is untouched.
    client.put_object(Bucket=bucket, Key="team/job-2/ckpt-000000000001-ff/state.pt", Body=b"x")
    CheckpointStore(f"s3://{bucket}/{prefix}").restore()
    assert client.get_object(Bucket=bucket, Key="team/job-2/ckpt-000000000001-ff/state.pt")["Body"].read() == b"x"


def test_gcs_store_against_storage_emulator(gcs_env):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(project="test", credentials=AnonymousCredentials())
    bucket = client.create_bucket(f"ckpt-{uuid.uuid4().hex[:8]}")
    prefix = "job-1"
    exercise_object_store(
        f"gs://{bucket.name}/{prefix}",
        raw_delete=lambda key: bucket.blob(f"{prefix}/{key}").delete(),
        raw_put=lambda key, data: bucket.blob(f"{prefix}/{key}").upload_from_string(data),
    )


def test_s3_large_file_goes_through_multipart_and_round_trips(s3_bucket):
    client, bucket = s3_bucket
    big = bytes(range(256)) * (9 * 4096)  # 9 MiB: above boto3's 8 MiB multipart threshold
    store = CheckpointStore(f"s3://{bucket}/big")
    saved = store.save(1, {"state.pt": big})
    head = client.head_object(Bucket=bucket, Key=f"big/{saved.checkpoint_id}/state.pt")
    assert "-" in head["ETag"]  # a multipart ETag ("<md5>-<parts>")
    assert store.load().files["state.pt"] == big
