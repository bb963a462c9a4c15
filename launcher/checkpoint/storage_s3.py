"""Checkpoint objects in S3 (boto3). A PUT is atomic per object, so no temp names are needed.

boto3 reads AWS_ENDPOINT_URL itself; we also pass it explicitly and use path-style addressing
when it is set, so S3-compatible servers (moto, MinIO) work.
"""

from __future__ import annotations

import io
import os

from launcher.checkpoint.storage_base import Storage, join_key
from launcher.errors import ProviderError


class S3Storage(Storage):
    def __init__(self, bucket: str, prefix: str = "", client=None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client = client or _make_client()

    def put(self, key: str, data: bytes) -> None:
        # Managed transfer: multipart for large objects, which S3 still publishes atomically
        # (the object appears only when the upload completes).
        try:
            self._client.upload_fileobj(io.BytesIO(data), self.bucket, join_key(self.prefix, key))
        except Exception as exc:  # botocore raises many types; one readable error
            raise ProviderError(f"S3 put {self.url}/{key} failed: {exc}") from exc

    def get(self, key: str) -> bytes:
        from botocore.exceptions import ClientError

        buf = io.BytesIO()
        try:
            self._client.download_fileobj(self.bucket, join_key(self.prefix, key), buf)
            return buf.getvalue()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"{self.url}/{key}") from exc
            raise ProviderError(f"S3 get {self.url}/{key} failed: {exc}") from exc

    def size(self, key: str) -> int:
        from botocore.exceptions import ClientError

        try:
            return int(self._client.head_object(Bucket=self.bucket, Key=join_key(self.prefix, key))["ContentLength"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(f"{self.url}/{key}") from exc
            raise ProviderError(f"S3 head {self.url}/{key} failed: {exc}") from exc

    def list(self, prefix: str = "") -> list[str]:
        full = join_key(self.prefix, prefix) if prefix else (f"{self.prefix}/" if self.prefix else "")
        strip = len(self.prefix) + 1 if self.prefix else 0
        keys = []
        try:
            for page in self._client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
                keys.extend(obj["Key"][strip:] for obj in page.get("Contents", []))
        except Exception as exc:
            raise ProviderError(f"S3 list {self.url} failed: {exc}") from exc
        return sorted(keys)

    def delete(self, key: str) -> None:
        try:
            self._client.delete_object(Bucket=self.bucket, Key=join_key(self.prefix, key))
        except Exception as exc:
            raise ProviderError(f"S3 delete {self.url}/{key} failed: {exc}") from exc


def _make_client():
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:  # the `aws` extra
        raise ProviderError("s3:// checkpoints need boto3 (pip install 'gpu-launcher[aws]')") from exc
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    config = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 5, "mode": "standard"})
    return boto3.client("s3", endpoint_url=endpoint or None, config=config if endpoint else None)
