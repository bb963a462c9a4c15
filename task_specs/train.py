#!/usr/bin/env python
"""Example training job: a small CNN on scikit-learn's bundled digits (offline, 1,797 8x8 images).

What makes it a good preemption test:
- deterministic: fixed seeds, `torch.use_deterministic_algorithms(True)`, a fixed thread count,
  and a data order that is a pure function of (seed, epoch);
- resumes exactly: model, optimizer, LR scheduler, the torch/NumPy/Python RNG states of every
  rank, and the position (epoch, batch) inside the epoch come back from the latest valid
  checkpoint in `--checkpoint-dir` / LAUNCHER_CHECKPOINT_DIR (a path, file://, s3:// or gs://);
- checkpoints every `--checkpoint-every-steps` / `--checkpoint-every-seconds` and on a
  preemption notice (SIGTERM or the cloud metadata endpoint), then exits with
  PREEMPTED_EXIT_CODE (75);
- runs DDP when WORLD_SIZE or SKYPILOT_NUM_NODES > 1 (gloo on CPU, nccl on GPU);
- logs metrics as JSON lines on stdout; the LAST line is `final_weights_sha256=<hex>`, so
  an interrupted-and-resumed run can be compared with an uninterrupted one bit for bit.
"""

from __future__ import annotations

import os
import signal

# cuBLAS needs this before CUDA initialises, or deterministic mode refuses GEMMs on the GPU.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

# A preemption notice (SIGTERM) can come while torch is still importing, which takes seconds on
# a busy machine. Without a handler it would kill the job with 143 instead of 75. Record it now;
# main() hands it to `notice` and run() exits with PREEMPTED_EXIT_CODE before training further.
_EARLY_SIGNALS: list[int] = []
if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda signum, _frame: _EARLY_SIGNALS.append(signum))
    print('{"event": "start", "notice_handler": true}', flush=True)

import argparse  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import timedelta  # noqa: E402
from pathlib import Path  # noqa: E402

try:
    import launcher.checkpoint  # noqa: F401
except ImportError:  # running from a synced checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from launcher.checkpoint import (  # noqa: E402
    CHECKPOINT_DIR_ENV,
    PREEMPTED_EXIT_CODE,
    CheckpointStore,
    LoadedCheckpoint,
    notice,
)
from launcher.checkpoint.torch_state import (  # noqa: E402
    capture_rng_state,
    read_training_state,
    restore_rng_state,
    restore_torch_rng,
    save_training_state,
    torch_rng_tensors,
    weights_sha256,
)

BAD_INPUT_EXIT_CODE = 2


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in total")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    p.add_argument(
        "--checkpoint-dir",
        default=os.environ.get(CHECKPOINT_DIR_ENV),
        help=f"path or URL (file://, s3://, gs://); default ${CHECKPOINT_DIR_ENV}; none = no checkpoints",
    )
    p.add_argument("--checkpoint-every-steps", type=int, default=50)
    p.add_argument("--checkpoint-every-seconds", type=float, default=None)
    p.add_argument("--keep-last", type=int, default=3)
    p.add_argument("--log-every-steps", type=int, default=10)
    p.add_argument("--step-time-s", type=float, default=0.0, help="minimum wall time per step (simulates a bigger model)")
    p.add_argument("--num-threads", type=int, default=1)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "checkpoint_every_steps", "keep_last", "log_every_steps", "num_threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def log(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


# ---- distributed setup --------------------------------------------------------------------
def world_from_env() -> tuple[int, int]:
    world = int(os.environ.get("WORLD_SIZE") or os.environ.get("SKYPILOT_NUM_NODES") or 1)
    rank = int(os.environ.get("RANK") or os.environ.get("SKYPILOT_NODE_RANK") or 0)
    return world, rank


def init_distributed(world: int, rank: int, device: torch.device) -> None:
    if world <= 1:
        return
    if not os.environ.get("MASTER_ADDR"):
        ips = os.environ.get("SKYPILOT_NODE_IPS", "").split()
        os.environ["MASTER_ADDR"] = ips[0] if ips else "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29500")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=world, timeout=timedelta(minutes=5))


def any_rank(flags: list[bool], world: int, device: torch.device) -> list[bool]:
    """OR of each flag across ranks, so every rank takes the same branch."""
    if world <= 1:
        return flags
    t = torch.tensor([int(f) for f in flags], dtype=torch.int32, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [bool(v) for v in t.tolist()]


# ---- data and model -----------------------------------------------------------------------
def load_digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits, read from its CSV without importing sklearn (saves ~1 s
    per start, which matters when a job is restarted after every preemption)."""
    import importlib.util

    spec = importlib.util.find_spec("sklearn")
    for base in (spec.submodule_search_locations or []) if spec else []:
        csv = Path(base) / "datasets" / "data" / "digits.csv.gz"
        if csv.is_file():
            raw = np.loadtxt(csv, delimiter=",")
            return raw[:, :-1].reshape(-1, 8, 8), raw[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    digits = load_digits()
    return digits.images, digits.target


def load_digits_split(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    images, target = load_digits_arrays()
    x = torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(target, dtype=torch.int64)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_test = len(y) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build_model(kind: str) -> nn.Module:
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip


def epoch_order(n: int, seed: int, epoch: int) -> torch.Tensor:
    """The data order of an epoch: a pure function of (seed, epoch), never of how we got here."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


def augment(x: torch.Tensor) -> torch.Tensor:
    # Uses the Python and NumPy global RNGs on purpose: resuming must restore them too.
    if random.random() < 0.5:
        return x
    noise = np.random.normal(0.0, 0.05, size=tuple(x.shape)).astype(np.float32)
    return x + torch.from_numpy(noise).to(x.device)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # Written out with one_hot: nll_loss has no deterministic CUDA kernel, so
    # F.cross_entropy raises on the GPU under torch.use_deterministic_algorithms(True).
    log_probs = F.log_softmax(logits, dim=1)
    return -(log_probs * F.one_hot(target, log_probs.shape[1]).to(log_probs.dtype)).sum(dim=1).mean()


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    was_training = model.training
    model.eval()
    acc = (model(x).argmax(dim=1) == y).float().mean().item()
    model.train(was_training)
    return acc


# ---- the job ------------------------------------------------------------------------------
class ConfigMismatch(ValueError):
    """The checkpoint was written by a run with other hyperparameters or world size."""


@dataclass
class Job:
    """Everything a checkpoint holds, plus where this rank stands."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    config: dict
    world: int
    rank: int
    store: CheckpointStore | None
    step: int = 0
    epoch: int = 0
    batch: int = 0  # next batch within `epoch`

    def restore(self, loaded: LoadedCheckpoint, device: torch.device) -> None:
        tensors, progress = read_training_state(loaded, map_location=device)
        if progress["config"] != self.config:
            raise ConfigMismatch(
                f"checkpoint {loaded.checkpoint.url} was written with {progress['config']}, "
                f"this run has {self.config}; use another --checkpoint-dir"
            )
        self.model.load_state_dict(tensors["model"])
        self.optimizer.load_state_dict(tensors["optimizer"])
        self.scheduler.load_state_dict(tensors["scheduler"])
        restore_torch_rng(tensors["torch_rng"][self.rank])
        restore_rng_state(progress["rng"][self.rank])
        self.step, self.epoch, self.batch = progress["step"], progress["epoch"], progress["batch"]

    def save(self, reason: str) -> None:
        """Collective: every rank contributes its RNG states; rank 0 writes."""
        rng, torch_rng = capture_rng_state(), torch_rng_tensors()
        rngs, torch_rngs = [rng], [torch_rng]
        if self.world > 1:
            rngs, torch_rngs = [None] * self.world, [None] * self.world
            dist.all_gather_object(rngs, rng)
            dist.all_gather_object(torch_rngs, torch_rng)
        if self.rank == 0 and self.store is not None:
            started = time.monotonic()
            tensors = {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(),
                "torch_rng": torch_rngs,
            }
            progress = {"step": self.step, "epoch": self.epoch, "batch": self.batch, "rng": rngs, "config": self.config}
            metadata = {"reason": reason, "epoch": self.epoch, "batch": self.batch, "world_size": self.world}
            ckpt = save_training_state(self.store, self.step, tensors, progress, metadata=metadata)
            log("checkpoint", step=self.step, reason=reason, checkpoint=ckpt.checkpoint_id,
                save_s=round(time.monotonic() - started, 4))  # fmt: skip
        if self.world > 1:
            dist.barrier()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    world, rank = world_from_env()
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    torch.set_num_threads(args.num_threads)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    notice.install()
    for signum in _EARLY_SIGNALS:  # after install(): a signal from now on reaches `notice` itself
        notice.request("signal", f"{signal.Signals(signum).name} (before training started)")
    init_distributed(world, rank, device)
    try:
        return run(args, world, rank, device)
    finally:
        if world > 1 and dist.is_initialized():
            dist.destroy_process_group()


def run(args: argparse.Namespace, world: int, rank: int, device: torch.device) -> int:
    is_main = rank == 0
    x_train, y_train, x_test, y_test = (t.to(device) for t in load_digits_split(args.seed))
    per_rank = len(y_train) // world
    steps_per_epoch = per_rank // args.batch_size
    total_steps = args.epochs * steps_per_epoch
    if args.max_steps is not None:
        total_steps = min(total_steps, args.max_steps)
    config = {
        "seed": args.seed, "model": args.model, "batch_size": args.batch_size, "lr": args.lr,
        "epochs": args.epochs, "total_steps": total_steps, "world_size": world,
    }  # fmt: skip

    torch.manual_seed(args.seed)  # identical initial weights on every rank
    model = build_model(args.model).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(total_steps, 1))
    torch.manual_seed(args.seed * 1000 + rank + 1)  # dropout differs per rank, reproducibly
    np.random.seed(args.seed * 1000 + rank + 1)
    random.seed(args.seed * 1000 + rank + 1)
    ddp = model
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)

    # Only rank 0 touches the store; the others get the checkpoint's bytes from it.
    store = CheckpointStore(args.checkpoint_dir, keep_last=args.keep_last) if args.checkpoint_dir and is_main else None
    job = Job(model, optimizer, scheduler, config, world, rank, store)
    if args.checkpoint_dir:
        loaded = resume(store, world, rank)
        if loaded is not None:
            try:
                job.restore(loaded, device)
            except ConfigMismatch as exc:
                if is_main:
                    print(exc, file=sys.stderr)
                return BAD_INPUT_EXIT_CODE
            if is_main:
                log("resumed", step=job.step, epoch=job.epoch, batch=job.batch,
                    checkpoint=loaded.checkpoint.checkpoint_id)  # fmt: skip

    # A notice before the first step (e.g. during start-up): the state is the checkpoint just
    # restored (or the initial one), so there is nothing to save. Leave at once.
    if any_rank([notice.requested()], world, device)[0]:
        if is_main:
            got = notice.notice()
            log("preempted", step=job.step, source=got.source if got else "peer", before_training=True)
        return PREEMPTED_EXIT_CODE

    last_save_s = time.monotonic()
    resumed_at = job.step
    ddp.train()
    while job.step < total_steps:
        if job.batch == 0 and is_main:
            log("epoch_start", epoch=job.epoch, step=job.step)
        order = epoch_order(len(y_train), args.seed, job.epoch)[rank::world][:per_rank]
        while job.batch < steps_per_epoch and job.step < total_steps:
            started = time.monotonic()
            idx = order[job.batch * args.batch_size : (job.batch + 1) * args.batch_size].to(device)
            loss = cross_entropy(ddp(augment(x_train[idx])), y_train[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            job.step += 1
            job.batch += 1
            epoch_done = job.batch == steps_per_epoch
            if epoch_done:
                job.epoch, job.batch = job.epoch + 1, 0
            if is_main and (job.step % args.log_every_steps == 0 or job.step == total_steps):
                log("step", step=job.step, epoch=job.epoch, loss=loss.item(), lr=scheduler.get_last_lr()[0])
            if args.step_time_s > 0:
                time.sleep(max(0.0, args.step_time_s - (time.monotonic() - started)))
            time_due = (
                args.checkpoint_every_seconds is not None
                and time.monotonic() - last_save_s >= args.checkpoint_every_seconds
            )
            # Every rank must take the same branch: a notice on any rank stops them all.
            preempted, time_due = any_rank([notice.requested(), time_due], world, device)
            if preempted:
                job.save("preemption")
                if is_main:
                    got = notice.notice()
                    log("preempted", step=job.step, source=got.source if got else "peer")
                return PREEMPTED_EXIT_CODE
            if job.step < total_steps and (job.step % args.checkpoint_every_steps == 0 or time_due):
                job.save("interval_seconds" if time_due else "interval")
                last_save_s = time.monotonic()
            if epoch_done:
                if is_main:
                    log("eval", epoch=job.epoch - 1, step=job.step, test_accuracy=accuracy(model, x_test, y_test))
                break

    if job.step > resumed_at:
        job.save("final")
    digest = weights_sha256(model.state_dict())
    if is_main:
        log("done", step=job.step, test_accuracy=accuracy(model, x_test, y_test))
    print(f"final_weights_sha256={digest}", flush=True)
    return 0


def resume(store: CheckpointStore | None, world: int, rank: int) -> LoadedCheckpoint | None:
    """Rank 0 restores (and repairs) the latest valid checkpoint and sends its bytes to the
    other ranks, so only rank 0 needs to reach the store."""
    loaded = store.restore() if rank == 0 else None
    if world <= 1:
        return loaded
    box = [loaded]
    dist.broadcast_object_list(box, src=0)
    return box[0]


if __name__ == "__main__":
    sys.exit(main())
