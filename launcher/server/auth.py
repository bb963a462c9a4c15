"""Users, roles per project and API tokens of `launcher server`.

A token is `lsk_<id>_<secret>`: the id finds the row, the secret (32 random bytes) is checked
against its stored SHA-256 in constant time. The token itself is returned once, when created,
and never stored, logged or put in an error message. A plain hash fits here (not a slow
password hash): the secret is random with 256 bits, so nothing can be guessed from the hash.

Roles: viewer (read runs, logs, reports) < member (also launch and cancel) < admin (also
budgets and users). A role on project '*' applies to every project.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from launcher.errors import BadInputError, ConflictError, NotFoundError, did_you_mean
from launcher.ledger import models as m
from launcher.server.errors import ForbiddenError, UnauthenticatedError

ROLES = ("viewer", "member", "admin")
ALL_PROJECTS = "*"
TOKEN_PREFIX = "lsk_"
_TOKEN_RE = re.compile(r"^lsk_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,254}$")


@dataclass(frozen=True)
class Principal:
    """Who made a request: the user and their role per project."""

    user: str
    roles: dict[str, str]  # project ('*' = all) -> role

    def role_in(self, project: str) -> str | None:
        ranks = [ROLES.index(r) for p, r in self.roles.items() if p in (project, ALL_PROJECTS)]
        return ROLES[max(ranks)] if ranks else None

    def can(self, role: str, project: str) -> bool:
        have = self.role_in(project)
        return have is not None and ROLES.index(have) >= ROLES.index(role)

    def require(self, role: str, project: str) -> None:
        if not self.can(role, project):
            have = self.role_in(project)
            raise ForbiddenError(
                f"user {self.user!r} is {'a ' + have if have else 'not a member'} of project {project!r}; this needs {role}"
            )

    def visible_projects(self) -> set[str] | None:
        """Projects this user may read; None = every project."""
        if ALL_PROJECTS in self.roles:
            return None
        return set(self.roles)


_ANY_TOKEN_RE = re.compile(r"lsk_[0-9A-Za-z]+_[A-Za-z0-9_-]+")


def redact_tokens(text: str) -> str:
    """Replace anything shaped like one of our tokens (e.g. pasted where a run id goes)."""
    return _ANY_TOKEN_RE.sub("lsk_<redacted>", text)


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name or ""):
        raise BadInputError(f"user name {name!r} is not valid (letters, digits, . _ @ -)")
    return name


def _check_role(role: str) -> str:
    if role not in ROLES:
        raise BadInputError(f"unknown role {role!r}", hint=did_you_mean(role, ROLES) or f"one of {', '.join(ROLES)}")
    return role


def _sha256(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class Users:
    """User, role and token records in the ledger (`ledger` is a launcher Ledger)."""

    def __init__(self, ledger) -> None:
        self.led = ledger

    def add(self, name: str, *, project: str, role: str) -> None:
        """Create the user if new and give them `role` on `project` (replacing a role there)."""
        _check_name(name)
        _check_role(role)
        if not project:
            raise BadInputError("empty project name")
        now = self.led.now()
        with self.led._tx() as c:
            if c.execute(select(m.server_users.c.name).where(m.server_users.c.name == name)).first() is None:
                c.execute(insert(m.server_users).values(name=name, created_at=now))
            r = m.server_roles.c
            c.execute(delete(m.server_roles).where(r.user_name == name, r.project == project))
            c.execute(insert(m.server_roles).values(user_name=name, project=project, role=role))

    def remove(self, name: str) -> None:
        """Delete the user, their roles and tokens (their tokens stop working at once)."""
        with self.led._tx() as c:
            res = c.execute(delete(m.server_users).where(m.server_users.c.name == name))
            c.execute(delete(m.server_roles).where(m.server_roles.c.user_name == name))
            c.execute(delete(m.api_tokens).where(m.api_tokens.c.user_name == name))
        if res.rowcount != 1:
            raise NotFoundError(f"no user {name!r}", hint=did_you_mean(name, [u["name"] for u in self.list()]))

    def list(self) -> list[dict]:
        with self.led._read() as c:
            users = c.execute(select(m.server_users).order_by(m.server_users.c.name)).all()
            roles = c.execute(select(m.server_roles)).all()
            tokens = c.execute(select(m.api_tokens.c.user_name, m.api_tokens.c.token_id).where(m.api_tokens.c.revoked_at.is_(None))).all()
        out = []
        for u in users:
            out.append({
                "name": u.name, "created_at": u.created_at,
                "roles": {r.project: r.role for r in roles if r.user_name == u.name},
                "active_tokens": sorted(t.token_id for t in tokens if t.user_name == u.name),
            })  # fmt: skip
        return out

    def create_token(self, user: str, *, label: str | None = None) -> tuple[str, str]:
        """(token_id, token). The token is shown to the caller once and not kept."""
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        try:
            with self.led._tx() as c:
                if c.execute(select(m.server_users.c.name).where(m.server_users.c.name == user)).first() is None:
                    raise NotFoundError(f"no user {user!r}", hint="add one with `launcher server users add`")
                c.execute(
                    insert(m.api_tokens).values(
                        token_id=token_id, user_name=user, secret_sha256=_sha256(secret), label=label, created_at=self.led.now()
                    )
                )
        except IntegrityError as e:  # a 48-bit id collision: vanishingly rare
            raise ConflictError("token id collision; try again") from e
        return token_id, f"{TOKEN_PREFIX}{token_id}_{secret}"

    def revoke_token(self, token_id: str) -> None:
        t = m.api_tokens.c
        token_id = token_id.removeprefix(TOKEN_PREFIX).split("_")[0]  # also accepts the whole token
        with self.led._tx() as c:
            res = c.execute(update(m.api_tokens).where(t.token_id == token_id, t.revoked_at.is_(None)).values(revoked_at=self.led.now()))
        if res.rowcount != 1:
            raise NotFoundError(f"no active token with id {token_id!r}")

    def authenticate(self, authorization: str | None) -> Principal:
        """From an `Authorization: Bearer <token>` header value to the user, checked against the
        ledger on every request (so a revoked token or removed user stops at once)."""
        if not authorization:
            raise UnauthenticatedError("this server needs a token: send `Authorization: Bearer <token>`")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthenticatedError("the Authorization header must be `Bearer <token>`")
        match = _TOKEN_RE.match(token.strip())
        if match is None:
            raise UnauthenticatedError("malformed token")
        token_id, secret = match.groups()
        t = m.api_tokens.c
        with self.led._read() as c:
            row = c.execute(select(t.user_name, t.secret_sha256, t.revoked_at).where(t.token_id == token_id)).first()
            ok = row is not None and row.revoked_at is None and hmac.compare_digest(row.secret_sha256, _sha256(secret))
            if not ok:
                raise UnauthenticatedError("unknown or revoked token")
            roles = c.execute(select(m.server_roles.c.project, m.server_roles.c.role).where(m.server_roles.c.user_name == row.user_name)).all()
        return Principal(row.user_name, {r.project: r.role for r in roles})


def principal_of(ledger, user: str | None) -> Principal:
    """A user's roles as the ledger has them now (a removed or unknown user has none)."""
    if not user:
        return Principal("", {})
    with ledger._read() as c:
        rows = c.execute(select(m.server_roles.c.project, m.server_roles.c.role).where(m.server_roles.c.user_name == user)).all()
    return Principal(user, {r.project: r.role for r in rows})
