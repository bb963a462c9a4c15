"""Where checkpoint objects live: one backend per URL scheme behind `storage_base.Storage`.

Keys are '/'-separated paths relative to the store's root (a directory or a bucket prefix).
`put` must be atomic per object: a reader sees the old object, the new one, or none.
"""

from __future__ import annotations

from urllib.parse import urlparse

from launcher.checkpoint.storage_base import Storage, join_key  # noqa: F401 - the interface, re-exported
from launcher.errors import BadInputError

SCHEMES = ("file", "s3", "gs")


def open_storage(url: str) -> Storage:
    """A backend from a URL: `/path`, `relative/path`, `file:///path`, `s3://bucket/prefix`,
    `gs://bucket/prefix`. Cloud SDKs are imported only for their scheme."""
    if not url:
        raise BadInputError("empty checkpoint URL")
    parsed = urlparse(url)
    scheme = parsed.scheme.lower()
    if scheme in ("", "file"):
        from launcher.checkpoint.storage_local import LocalStorage

        if scheme == "file" and parsed.netloc not in ("", "localhost"):
            raise BadInputError(
                f"checkpoint URL {url!r} names a host", hint="use file:///absolute/path or a plain path"
            )
        return LocalStorage(parsed.path if scheme == "file" else url)
    if scheme in ("s3", "gs"):
        bucket = parsed.netloc
        if not bucket:
            raise BadInputError(f"checkpoint URL {url!r} has no bucket", hint=f"use {scheme}://BUCKET/PREFIX")
        prefix = parsed.path.strip("/")
        if scheme == "s3":
            from launcher.checkpoint.storage_s3 import S3Storage

            return S3Storage(bucket, prefix)
        from launcher.checkpoint.storage_gcs import GCSStorage

        return GCSStorage(bucket, prefix)
    from launcher.errors import did_you_mean

    raise BadInputError(
        f"unsupported checkpoint URL scheme {scheme!r} in {url!r}",
        hint=did_you_mean(scheme, SCHEMES) or "use a path, file://, s3:// or gs://",
    )
