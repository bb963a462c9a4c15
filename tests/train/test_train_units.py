"""train.py's parts, in-process (no subprocess start-up): the data order, the loss, and the
refusal to resume from a checkpoint written with other hyperparameters."""

from __future__ import annotations

import importlib.util
import signal
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from launcher.checkpoint import CheckpointStore, notice  # noqa: E402

TRAIN = Path(__file__).resolve().parents[2] / "task_specs" / "train.py"


@pytest.fixture(scope="module")
def train_mod():
    spec = importlib.util.spec_from_file_location("train_example", TRAIN)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop(spec.name, None)


@pytest.fixture
def isolated_torch_globals():
    """main() sets process-wide torch flags and a SIGTERM handler; put them back."""
    threads = torch.get_num_threads()
    handler = signal.getsignal(signal.SIGTERM)
    yield
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)
    signal.signal(signal.SIGTERM, handler)
    notice.reset()


def test_epoch_order_depends_only_on_seed_and_epoch(train_mod):
    a = train_mod.epoch_order(100, seed=1, epoch=3)
    torch.rand(10)  # global RNG use in between must not matter
    assert a.equal(train_mod.epoch_order(100, seed=1, epoch=3))
    assert not a.equal(train_mod.epoch_order(100, seed=1, epoch=4))
    assert not a.equal(train_mod.epoch_order(100, seed=2, epoch=3))
    assert sorted(a.tolist()) == list(range(100))


def test_written_out_loss_equals_cross_entropy(train_mod):
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(16, 10, generator=gen, requires_grad=True)
    target = torch.randint(0, 10, (16,), generator=gen)
    ours = train_mod.cross_entropy(logits, target)
    ref = torch.nn.functional.cross_entropy(logits, target)
    assert torch.allclose(ours, ref, rtol=1e-6, atol=1e-7)
    (g_ours,) = torch.autograd.grad(ours, logits)
    (g_ref,) = torch.autograd.grad(ref, logits)
    assert torch.allclose(g_ours, g_ref, rtol=1e-5, atol=1e-7)


def test_digits_split_is_the_full_bundled_dataset(train_mod):
    x_train, y_train, x_test, y_test = train_mod.load_digits_split(0)
    assert len(y_train) + len(y_test) == 1797 and len(y_test) == 1797 // 5
    assert tuple(x_train.shape[1:]) == (1, 8, 8) and 0 <= float(x_train.min()) and float(x_train.max()) <= 1
    assert set(y_train.tolist()) == set(range(10))


def test_resume_with_other_hyperparameters_is_refused(train_mod, isolated_torch_globals, tmp_path, capsys):
    ckpt = str(tmp_path / "ck")
    base = ["--model", "mlp", "--epochs", "1", "--max-steps", "4", "--checkpoint-dir", ckpt]
    assert train_mod.main(base) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert first.startswith("final_weights_sha256=")
    assert CheckpointStore(ckpt).latest().step == 4

    assert train_mod.main([*base, "--lr", "0.01"]) == train_mod.BAD_INPUT_EXIT_CODE
    err = capsys.readouterr().err
    assert "'lr': 0.003" in err and "'lr': 0.01" in err
    assert CheckpointStore(ckpt).latest().step == 4  # nothing overwritten
