"""Errors of the server's API, mapped to HTTP status codes (and back, in the client)."""

from __future__ import annotations

from launcher.errors import CredentialsError, DiskFullError, ExitCode, LauncherError, RefusedError


class UnauthenticatedError(CredentialsError):
    """No token, a malformed one, or one that is unknown or revoked (HTTP 401)."""


class ForbiddenError(RefusedError):
    """A valid token whose user lacks the role for this project (HTTP 403)."""


STATUS_FOR_EXIT = {
    ExitCode.BAD_INPUT: 400,
    ExitCode.CREDENTIALS: 401,
    ExitCode.NOT_FOUND: 404,
    ExitCode.CONFLICT: 409,
    ExitCode.REFUSED: 422,
    ExitCode.PROVIDER: 502,
}


def http_status(e: LauncherError) -> int:
    if isinstance(e, ForbiddenError):
        return 403
    if isinstance(e, DiskFullError):
        return 507  # Insufficient Storage (the client reads it as exit 5, like any server failure)
    return STATUS_FOR_EXIT.get(e.exit_code, 500)
