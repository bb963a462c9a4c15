"""CheckpointStore on a local directory: round trip, manifest, keep-last-N, torn checkpoints."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from launcher.checkpoint import CheckpointCorruptError, CheckpointStore, open_storage
from launcher.checkpoint.manifest import MANIFEST_NAME, Manifest, ManifestError
from launcher.checkpoint.storage import Storage
from launcher.checkpoint.storage_local import LocalStorage
from launcher.errors import BadInputError, NotFoundError


class TickClock:
    """Injected clock: every save gets a later timestamp, independent of the machine clock."""

    def __init__(self) -> None:
        self.now_ns = 1_700_000_000_000_000_000

    def __call__(self) -> int:
        self.now_ns += 1_000
        return self.now_ns


def payload(step: int) -> dict[str, bytes]:
    return {"weights.bin": bytes([step % 251]) * (1000 + step), "progress.json": json.dumps({"step": step}).encode()}


def ckpt_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.name.startswith("ckpt-"))


def test_round_trip_bytes_paths_and_metadata(tmp_path):
    store = CheckpointStore(tmp_path / "ck", keep_last=None)
    extra = tmp_path / "extra.txt"
    extra.write_bytes(b"from a file")
    saved = store.save(7, {**payload(7), "sub/extra.txt": extra}, metadata={"epoch": 2})
    loaded = store.load(saved)
    assert loaded.step == 7
    assert loaded.files == {**payload(7), "sub/extra.txt": b"from a file"}
    assert loaded.checkpoint.metadata == {"epoch": 2}
    assert store.load(saved.checkpoint_id).files == loaded.files
    assert store.latest() == saved


def test_manifest_records_sha256_and_size_and_checks_itself(tmp_path):
    store = CheckpointStore(tmp_path / "ck")
    saved = store.save(3, payload(3))
    raw = (tmp_path / "ck" / saved.checkpoint_id / MANIFEST_NAME).read_bytes()
    manifest = Manifest.from_bytes(raw)
    for name, data in payload(3).items():
        entry = manifest.entry(name)
        assert entry.sha256 == hashlib.sha256(data).hexdigest()
        assert entry.size_bytes == len(data)
    body = json.loads(raw)
    body["step"] = 4  # an edit without recomputing the manifest's own checksum
    with pytest.raises(ManifestError):
        Manifest.from_bytes(json.dumps(body).encode())


def test_keep_last_n_deletes_oldest(tmp_path):
    store = CheckpointStore(tmp_path / "ck", keep_last=2, clock_ns=TickClock())
    saved = [store.save(s, payload(s)) for s in (10, 20, 30, 40, 50)]
    assert ckpt_dirs(tmp_path / "ck") == sorted(c.checkpoint_id for c in saved[-2:])
    assert [c.step for c in store.checkpoints()] == [50, 40]


def test_same_step_saved_twice_latest_is_the_later_save(tmp_path):
    store = CheckpointStore(tmp_path / "ck", keep_last=None, clock_ns=TickClock())
    store.save(5, {"x": b"first"})
    second = store.save(5, {"x": b"second"})
    assert store.latest() == second
    assert store.load().files == {"x": b"second"}


def _damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-1])


def _damage_flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _damage_delete(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(
    "target,damage",
    [
        ("weights.bin", _damage_truncate),
        ("weights.bin", _damage_flip),
        ("weights.bin", _damage_delete),
        (MANIFEST_NAME, _damage_delete),
        (MANIFEST_NAME, _damage_truncate),
        (MANIFEST_NAME, _damage_flip),
    ],
)
def test_torn_newest_is_never_loaded_and_is_repaired(tmp_path, target, damage):
    root = tmp_path / "ck"
    store = CheckpointStore(root, keep_last=None, clock_ns=TickClock())
    good = store.save(1, payload(1))
    torn = store.save(2, payload(2))
    damage(root / torn.checkpoint_id / target)

    # A reader beside the writer sees the older, valid checkpoint and deletes nothing.
    assert store.latest(repair=False) == good
    if damage is not _damage_flip or target == MANIFEST_NAME:  # same-size damage needs a content check
        assert store.latest(verify="size") == good
    assert torn.checkpoint_id in ckpt_dirs(root)
    # Loading the torn one by id fails loudly instead of returning damaged bytes.
    with pytest.raises((CheckpointCorruptError, NotFoundError)):
        store.load(torn.checkpoint_id)
    # The writer at start-up gets the valid one and removes the torn one.
    restored = store.restore()
    assert restored is not None and restored.checkpoint == good and restored.files == payload(1)
    assert ckpt_dirs(root) == [good.checkpoint_id]


def test_only_torn_checkpoints_means_none(tmp_path):
    store = CheckpointStore(tmp_path / "ck")
    saved = store.save(1, payload(1))
    _damage_flip(tmp_path / "ck" / saved.checkpoint_id / "weights.bin")
    assert store.latest() is None
    with pytest.raises(NotFoundError):
        store.load()


class CrashAfter(Storage):
    """Storage that dies after `n` successful puts, like a process killed mid-save."""

    def __init__(self, inner: Storage, n: int) -> None:
        self.inner, self.n, self.url, self.puts = inner, n, inner.url, []

    def put(self, key, data):
        if len(self.puts) >= self.n:
            raise KeyboardInterrupt("killed")
        self.inner.put(key, data)
        self.puts.append(key)

    def get(self, key):
        return self.inner.get(key)

    def list(self, prefix=""):
        return self.inner.list(prefix)

    def delete(self, key):
        self.inner.delete(key)


def test_manifest_is_written_last_and_a_crash_before_it_leaves_the_previous_checkpoint(tmp_path):
    root = tmp_path / "ck"
    good = CheckpointStore(root, clock_ns=TickClock()).save(1, payload(1))
    crashing = CrashAfter(LocalStorage(root), n=1)
    with pytest.raises(KeyboardInterrupt):
        CheckpointStore(crashing).save(2, payload(2))
    assert MANIFEST_NAME not in crashing.puts[-1]
    assert CheckpointStore(root).latest() == good

    recording = CrashAfter(LocalStorage(root), n=100)
    CheckpointStore(recording, keep_last=None).save(3, payload(3))
    assert recording.puts[-1].endswith("/" + MANIFEST_NAME)
    assert len(recording.puts) == 3


def test_save_removes_leftovers_of_earlier_unfinished_saves(tmp_path):
    root = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        CheckpointStore(CrashAfter(LocalStorage(root), n=1)).save(4, payload(4))
    assert len(ckpt_dirs(root)) == 1
    saved = CheckpointStore(root).save(5, payload(5))
    assert ckpt_dirs(root) == [saved.checkpoint_id]


def test_urls_select_backends_and_bad_ones_are_refused(tmp_path):
    assert isinstance(open_storage(str(tmp_path)), LocalStorage)
    store = CheckpointStore(f"file://{tmp_path}/viaurl")
    saved = store.save(1, {"a": b"1"})
    assert (tmp_path / "viaurl" / saved.checkpoint_id / "a").read_bytes() == b"1"
    with pytest.raises(BadInputError) as exc:
        open_storage("s4://bucket/x")
    assert "s3" in str(exc.value)
    with pytest.raises(BadInputError):
        open_storage("gs:///no-bucket")
    with pytest.raises(BadInputError):
        store.save(2, {"../escape": b"x"})
    with pytest.raises(BadInputError):
        store.save(2, {MANIFEST_NAME: b"x"})
    with pytest.raises(BadInputError):
        store.latest(verify="sha")
    with pytest.raises(BadInputError):
        store.save(3, {"a": b"x"}, metadata={"when": object()})
    assert [c.step for c in store.checkpoints()] == [1]  # nothing written by the refused saves
    assert ckpt_dirs(tmp_path / "viaurl") == [saved.checkpoint_id]


def test_inspector_lists_verifies_and_repairs(tmp_path, capsys):
    from launcher.checkpoint.__main__ import main

    root = tmp_path / "ck"
    store = CheckpointStore(root, keep_last=None, clock_ns=TickClock())
    good = store.save(1, payload(1))
    torn = store.save(2, payload(2))
    _damage_flip(root / torn.checkpoint_id / "weights.bin")

    assert main(["ls", str(root), "--verify"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["valid"]) for r in rows] == [(2, False), (1, True)]
    assert main(["latest", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint_id"] == good.checkpoint_id
    assert main(["repair", str(root)]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"] == [torn.checkpoint_id]
    assert main(["ls", "s4://bucket"]) == 2
    assert main(["latest", str(tmp_path / "empty")]) == 7


def test_file_url_with_a_host_is_refused():
    with pytest.raises(BadInputError):
        open_storage("file://relative/path")
