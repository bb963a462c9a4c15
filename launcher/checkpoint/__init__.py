"""Checkpoints for training jobs: atomic saves with a manifest, the latest valid checkpoint,
keep-last-N, local / S3 / GCS storage, and preemption notices.

Importing this package does not import torch or any cloud SDK; torch helpers live in
`launcher.checkpoint.torch_state`.
"""

from launcher.checkpoint.manifest import FileEntry, Manifest
from launcher.checkpoint.notice import PREEMPTED_EXIT_CODE, PreemptionNotice
from launcher.checkpoint.storage import Storage, open_storage
from launcher.checkpoint.store import Checkpoint, CheckpointCorruptError, CheckpointStore, LoadedCheckpoint

CHECKPOINT_DIR_ENV = "LAUNCHER_CHECKPOINT_DIR"

__all__ = [
    "CHECKPOINT_DIR_ENV",
    "PREEMPTED_EXIT_CODE",
    "Checkpoint",
    "CheckpointCorruptError",
    "CheckpointStore",
    "FileEntry",
    "LoadedCheckpoint",
    "Manifest",
    "PreemptionNotice",
    "Storage",
    "open_storage",
]
