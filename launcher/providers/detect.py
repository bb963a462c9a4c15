"""Cheap credential detection: look for credentials where the SDKs would, without importing them.

Only files and environment variables are read (no boto3/google imports, no network), so
`launcher offers` can mark enabled clouds in milliseconds. A cloud marked enabled may still
reject the credentials; `launch` finds that out when it calls the provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from launcher.providers.credentials import CredentialStatus
from pricing.clouds import DETECTABLE_CLOUDS  # noqa: F401 - the clouds enabled_clouds answers for


def enabled_clouds(env: Mapping[str, str] | None = None, home: Path | None = None) -> dict[str, CredentialStatus]:
    """Credential status per cloud. `env` and `home` are injectable for tests."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()) if home is None else home
    return {
        "aws": _aws(env, home),
        "gcp": _gcp(env, home),
        "azure": _azure(env, home),
        "lambda": _lambda(env, home),
        "runpod": _runpod(env, home),
        "local": CredentialStatus("local", True, "always available"),
    }


def _found(cloud: str, source: str, account: str | None = None) -> CredentialStatus:
    return CredentialStatus(cloud, True, source, account)


_MISSING_PREFIX = "no credentials ("


def _missing(cloud: str, looked: str) -> CredentialStatus:
    return CredentialStatus(cloud, False, f"{_MISSING_PREFIX}{looked})")


def where_looked(status: CredentialStatus) -> str:
    """For a disabled cloud: 'looked in <places>' (or the reason the credentials are unusable)."""
    src = status.source
    if src.startswith(_MISSING_PREFIX) and src.endswith(")"):
        return "looked in " + src[len(_MISSING_PREFIX) : -1]
    return src


def _path(env: Mapping[str, str], var: str, default: Path) -> Path:
    return Path(env[var]).expanduser() if env.get(var) else default


def _aws(env: Mapping[str, str], home: Path) -> CredentialStatus:
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        where = "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
        if env.get("AWS_ENDPOINT_URL"):
            where += f" (endpoint {env['AWS_ENDPOINT_URL']})"
        return _found("aws", where)
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE") and env.get("AWS_ROLE_ARN"):
        return _found("aws", "AWS_WEB_IDENTITY_TOKEN_FILE/AWS_ROLE_ARN")
    if env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return _found("aws", "container credentials endpoint")
    profile = env.get("AWS_PROFILE") or env.get("AWS_DEFAULT_PROFILE") or "default"
    creds = _path(env, "AWS_SHARED_CREDENTIALS_FILE", home / ".aws" / "credentials")
    section = _ini_section(creds, profile)
    if section and section.get("aws_access_key_id") and section.get("aws_secret_access_key"):
        return _found("aws", f"{creds} [{profile}]")
    config = _path(env, "AWS_CONFIG_FILE", home / ".aws" / "config")
    csec = _ini_section(config, profile if profile == "default" else f"profile {profile}")
    if csec:
        if csec.get("aws_access_key_id") and csec.get("aws_secret_access_key"):
            return _found("aws", f"{config} [{profile}]")
        for key in ("sso_session", "sso_start_url", "role_arn", "credential_process", "web_identity_token_file"):
            if csec.get(key):
                return _found("aws", f"{config} [{profile}] ({key})")
    return _missing("aws", f"env AWS_ACCESS_KEY_ID, {creds}, {config}")


def _ini_section(path: Path, name: str) -> dict[str, str] | None:
    if not path.is_file():
        return None
    import configparser  # only where the file exists: `offers` on a machine without AWS files skips it

    parser = configparser.RawConfigParser()
    try:
        parser.read(path)
    except (configparser.Error, OSError, UnicodeDecodeError):
        return None
    return dict(parser.items(name)) if parser.has_section(name) else None


def _gcp(env: Mapping[str, str], home: Path) -> CredentialStatus:
    gac = env.get("GOOGLE_APPLICATION_CREDENTIALS")
    if gac:
        if Path(gac).expanduser().is_file():
            return _found("gcp", f"GOOGLE_APPLICATION_CREDENTIALS={gac}")
        return CredentialStatus("gcp", False, f"GOOGLE_APPLICATION_CREDENTIALS={gac} does not exist")
    config_dir = _path(env, "CLOUDSDK_CONFIG", home / ".config" / "gcloud")
    adc = config_dir / "application_default_credentials.json"
    if adc.is_file():
        return _found("gcp", str(adc))
    return _missing("gcp", f"GOOGLE_APPLICATION_CREDENTIALS, {adc}")


def _azure(env: Mapping[str, str], home: Path) -> CredentialStatus:
    if (
        env.get("AZURE_CLIENT_ID")
        and env.get("AZURE_TENANT_ID")
        and (
            env.get("AZURE_CLIENT_SECRET")
            or env.get("AZURE_CLIENT_CERTIFICATE_PATH")
            or env.get("AZURE_FEDERATED_TOKEN_FILE")
        )
    ):
        return _found("azure", "AZURE_CLIENT_ID/AZURE_TENANT_ID service principal")
    azure_dir = _path(env, "AZURE_CONFIG_DIR", home / ".azure")
    for name in ("msal_token_cache.json", "msal_token_cache.bin", "accessTokens.json"):
        if (azure_dir / name).is_file():
            return _found("azure", str(azure_dir / name))
    return _missing("azure", f"env AZURE_CLIENT_ID, {azure_dir}")


def _lambda(env: Mapping[str, str], home: Path) -> CredentialStatus:
    if env.get("LAMBDA_API_KEY"):
        return _found("lambda", "LAMBDA_API_KEY")
    keys = home / ".lambda_cloud" / "lambda_keys"
    if _file_has(keys, "api_key"):
        return _found("lambda", str(keys))
    return _missing("lambda", f"LAMBDA_API_KEY, {keys}")


def _runpod(env: Mapping[str, str], home: Path) -> CredentialStatus:
    if env.get("RUNPOD_API_KEY"):
        return _found("runpod", "RUNPOD_API_KEY")
    cfg = home / ".runpod" / "config.toml"
    if _file_has(cfg, "api_key"):
        return _found("runpod", str(cfg))
    return _missing("runpod", f"RUNPOD_API_KEY, {cfg}")


def _file_has(path: Path, needle: str) -> bool:
    try:
        return needle in path.read_text(errors="replace")
    except OSError:
        return False
