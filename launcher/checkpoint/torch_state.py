"""PyTorch helpers for CheckpointStore. Importing this module imports torch; the rest of
launcher.checkpoint does not.

A training state is saved as two files:
- `state.pt`: tensors and state dicts (model, optimizer, scheduler, torch RNG), loaded with
  `weights_only=True`, so a checkpoint cannot run code when it is loaded;
- `progress.json`: plain values (epoch, batch position, Python and NumPy RNG states, ...).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from typing import Any

import torch

from launcher.checkpoint.store import Checkpoint, CheckpointStore, LoadedCheckpoint

STATE_FILE = "state.pt"
PROGRESS_FILE = "progress.json"


def save_training_state(
    store: CheckpointStore,
    step: int,
    tensors: dict[str, Any],
    progress: dict[str, Any],
    metadata: dict[str, Any] | None = None,
) -> Checkpoint:
    buf = io.BytesIO()
    torch.save(tensors, buf)
    files = {STATE_FILE: buf.getvalue(), PROGRESS_FILE: json.dumps(progress, sort_keys=True).encode()}
    return store.save(step, files, metadata=metadata)


def read_training_state(loaded: LoadedCheckpoint, map_location: Any = "cpu") -> tuple[dict[str, Any], dict[str, Any]]:
    tensors = torch.load(io.BytesIO(loaded.files[STATE_FILE]), map_location=map_location, weights_only=True)
    progress = json.loads(loaded.files[PROGRESS_FILE])
    return tensors, progress


def capture_rng_state() -> dict[str, Any]:
    """Python and NumPy RNG states as JSON-able values; torch states as tensors (separately)."""
    out: dict[str, Any] = {"python": _py_state_to_json(random.getstate())}
    try:
        import numpy as np

        kind, keys, pos, has_gauss, cached = np.random.get_state()
        out["numpy"] = [kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)]
    except ImportError:
        pass
    return out


def restore_rng_state(state: dict[str, Any]) -> None:
    random.setstate(_py_state_from_json(state["python"]))
    if "numpy" in state:
        import numpy as np

        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))


def torch_rng_tensors() -> dict[str, torch.Tensor]:
    out = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        out["cuda"] = torch.cuda.get_rng_state()
    return out


def restore_torch_rng(states: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(states["cpu"].cpu())
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"].cpu())


def weights_sha256(state_dict: dict[str, torch.Tensor]) -> str:
    """sha256 over the tensors in key order: name, dtype, shape, then the raw bytes of a
    contiguous CPU copy (same dtype, little-endian as stored by torch on all our targets)."""
    h = hashlib.sha256()
    for name in sorted(state_dict):
        t = state_dict[name].detach().to("cpu").contiguous()
        h.update(name.encode())
        h.update(str(t.dtype).encode())
        h.update(repr(tuple(t.shape)).encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _py_state_to_json(state: tuple) -> list:
    version, internal, gauss = state
    return [version, list(internal), gauss]


def _py_state_from_json(state: list) -> tuple:
    version, internal, gauss = state
    return (version, tuple(internal), gauss)
