"""Checkpoint objects in Google Cloud Storage. An upload is atomic per object.

With STORAGE_EMULATOR_HOST set (gcp-storage-emulator, fake-gcs-server) the client talks to the
emulator with anonymous credentials.
"""

from __future__ import annotations

import os

from launcher.checkpoint.storage_base import Storage, join_key
from launcher.errors import ProviderError


class GCSStorage(Storage):
    def __init__(self, bucket: str, prefix: str = "", client=None) -> None:
        self.bucket_name = bucket
        self.prefix = prefix.strip("/")
        self.url = f"gs://{bucket}/{self.prefix}" if self.prefix else f"gs://{bucket}"
        self._client = client or _make_client()
        self._bucket = self._client.bucket(bucket)

    def put(self, key: str, data: bytes) -> None:
        try:
            self._bucket.blob(join_key(self.prefix, key)).upload_from_string(
                data, content_type="application/octet-stream"
            )
        except Exception as exc:
            raise ProviderError(f"GCS put {self.url}/{key} failed: {exc}") from exc

    def get(self, key: str) -> bytes:
        from google.api_core.exceptions import NotFound

        try:
            return self._bucket.blob(join_key(self.prefix, key)).download_as_bytes()
        except NotFound as exc:
            raise FileNotFoundError(f"{self.url}/{key}") from exc
        except Exception as exc:
            raise ProviderError(f"GCS get {self.url}/{key} failed: {exc}") from exc

    def size(self, key: str) -> int:
        blob = self._bucket.get_blob(join_key(self.prefix, key))  # None when absent
        if blob is None:
            raise FileNotFoundError(f"{self.url}/{key}")
        return int(blob.size)

    def list(self, prefix: str = "") -> list[str]:
        full = join_key(self.prefix, prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        try:
            return sorted(b.name[strip:] for b in self._client.list_blobs(self.bucket_name, prefix=full))
        except Exception as exc:
            raise ProviderError(f"GCS list {self.url} failed: {exc}") from exc

    def delete(self, key: str) -> None:
        from google.api_core.exceptions import NotFound

        try:
            self._bucket.blob(join_key(self.prefix, key)).delete()
        except NotFound:
            pass
        except Exception as exc:
            raise ProviderError(f"GCS delete {self.url}/{key} failed: {exc}") from exc


def _make_client():
    try:
        from google.cloud import storage
    except ImportError as exc:  # the `gcp` extra
        raise ProviderError("gs:// checkpoints need google-cloud-storage (pip install 'gpu-launcher[gcp]')") from exc
    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        project = os.environ.get("GOOGLE_CLOUD_PROJECT", "emulator-project")
        return storage.Client(project=project, credentials=AnonymousCredentials())
    return storage.Client()
