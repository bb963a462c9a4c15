"""The files a finished run leaves in its tracker: spec.yaml, plan.json, the final checkpoint's
manifest and the weights' sha256, gathered under runs/<id>/tracking-artifacts/."""

from __future__ import annotations

import shutil
from pathlib import Path

from launcher.atomic import atomic_write_bytes, atomic_write_text


def write_artifacts(job, final_weights_sha256: str | None) -> Path:
    rd = Path(job.run_dir)
    out = rd / "tracking-artifacts"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(mode=0o700)
    for name in ("spec.yaml", "plan.json"):
        if (rd / name).is_file():
            shutil.copyfile(rd / name, out / name)
    manifest = final_manifest(job.checkpoint_dir)
    if manifest is not None:
        atomic_write_bytes(out / "checkpoint" / "MANIFEST.json", manifest)
    if final_weights_sha256:
        atomic_write_text(out / "final_weights_sha256.txt", final_weights_sha256 + "\n")
    return out


def final_manifest(checkpoint_dir) -> bytes | None:
    """The newest committed checkpoint's manifest (sizes checked, nothing downloaded), or None."""
    from launcher.checkpoint import CheckpointStore
    from launcher.checkpoint.manifest import MANIFEST_NAME

    try:
        store = CheckpointStore(str(checkpoint_dir), keep_last=None)
        ckpt = store.latest(repair=False, verify="size")
        return store.storage.get(f"{ckpt.checkpoint_id}/{MANIFEST_NAME}") if ckpt else None
    except Exception:  # no store, unreachable bucket: the run has no manifest to show
        return None
