"""launcher.checkpoint.torch_state: training state round trip, RNG capture/restore, weight hash.
(The package itself must not import torch; checked in a clean interpreter.)"""

from __future__ import annotations

import random
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from launcher.checkpoint import CheckpointStore  # noqa: E402
from launcher.checkpoint.torch_state import (  # noqa: E402
    capture_rng_state,
    read_training_state,
    restore_rng_state,
    restore_torch_rng,
    save_training_state,
    torch_rng_tensors,
    weights_sha256,
)


def draw() -> tuple:
    return (random.random(), float(np.random.normal()), torch.rand(3).tolist())


def test_training_state_round_trip_restores_model_optimizer_and_all_rngs(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.ones(1, 4)).sum().backward()
    opt.step()
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    draw()  # move the generators off their seeds
    store = CheckpointStore(tmp_path / "ck")
    saved = save_training_state(
        store, 5,
        {"model": model.state_dict(), "optimizer": opt.state_dict(), "torch_rng": torch_rng_tensors()},
        {"epoch": 1, "rng": capture_rng_state()},
    )  # fmt: skip
    expected = draw()
    expected_hash = weights_sha256(model.state_dict())

    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    fresh = torch.nn.Linear(4, 2)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=0.1)
    tensors, progress = read_training_state(store.load(saved))
    fresh.load_state_dict(tensors["model"])
    fresh_opt.load_state_dict(tensors["optimizer"])
    restore_torch_rng(tensors["torch_rng"])
    restore_rng_state(progress["rng"])
    assert draw() == expected
    assert weights_sha256(fresh.state_dict()) == expected_hash
    assert progress["epoch"] == 1
    assert fresh_opt.state_dict()["state"][0]["exp_avg"].equal(opt.state_dict()["state"][0]["exp_avg"])


def test_weights_hash_sees_one_bit_and_ignores_insertion_order():
    a = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.zeros(2)}
    reordered = {"b": a["b"].clone(), "w": a["w"].clone()}
    assert weights_sha256(a) == weights_sha256(reordered)
    flipped = {k: v.clone() for k, v in a.items()}
    flipped["w"].view(torch.int32)[0, 0] ^= 1  # the lowest mantissa bit
    assert weights_sha256(flipped) != weights_sha256(a)
    # Layout does not matter, values do: a transposed view hashes like its contiguous copy.
    assert weights_sha256({"w": a["w"].t()}) == weights_sha256({"w": a["w"].t().contiguous()})
    assert weights_sha256({"w": a["w"].double()}) != weights_sha256({"w": a["w"]})


def test_checkpoint_package_imports_without_torch_or_cloud_sdks():
    code = (
        "import sys, launcher.checkpoint, launcher.checkpoint.notice;"
        "bad = [m for m in ('torch', 'boto3', 'google.cloud.storage', 'numpy') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
