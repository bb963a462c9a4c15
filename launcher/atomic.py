"""Atomic file writes (temp file, fsync, rename, fsync the folder): the pricing library's helper.

A crash at any point leaves either the old file or the new one, never a torn one.
"""

from __future__ import annotations

from pricing.atomic import atomic_write_bytes, atomic_write_text, fsync_dir

__all__ = ["atomic_write_bytes", "atomic_write_text", "fsync_dir"]
