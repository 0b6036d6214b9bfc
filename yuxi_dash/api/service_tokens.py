"""Service tokens of the HTTP API: create (shown once), list, revoke, authenticate.

A token is `yxd_` plus 43 URL-safe characters (256 random bits). Only its
SHA-256 hex digest is stored (`api_tokens.hash`): with that much entropy a fast
hash is enough, and a copy of the table holds no usable token. `authenticate`
hashes what a request presents first and looks up the digest (never the
token), then compares with `hmac.compare_digest`, so its timing says nothing
about how close a guess came. Unknown, malformed, revoked or expired is
Unauthorized (401); what the token may do is the service's role check
(`Actor.role`). A token may expire (`expires_in`: `90d`, `12h`, `30m`, `45s`
or seconds; `api_tokens.expires_at`). The actor of a token's calls is
`api:<actor>`. Creating, listing and revoking need the admin role; create and
revoke write an audit row, and every refusal does too.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, clean_actor_id, require_role
from yuxi_dash.errors import ApiTokenNotFound, InvalidInput, Unauthorized
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import API_TOKEN_ROLES, ApiToken, utcnow

TOKEN_PREFIX = "yxd_"
MAX_TOKEN_ACTOR = 128  # the api_tokens.actor column
MAX_PRESENTED = 256  # a longer credential is refused before it is hashed
ACTOR_PREFIX = "api:"
CREATE_ACTION = "api_token.create"
REVOKE_ACTION = "api_token.revoke"
LIST_ACTION = "api_token.list"
MAX_EXPIRES_IN = timedelta(days=3650)
_DURATION = re.compile(r"([0-9]{1,10})([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


@dataclass(frozen=True)
class TokenInfo(Record):
    """A token as `api token list` shows it: never the token, never its hash."""

    id: str
    role: str
    actor: str
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None


@dataclass(frozen=True)
class CreatedToken(Record):
    """A new token: `token` is shown once, here, and stored nowhere."""

    id: str
    token: str
    role: str
    actor: str
    created_at: datetime
    expires_at: datetime | None


def parse_expires_in(value: str | timedelta) -> timedelta:
    """A token's lifetime: a timedelta, or `90d`, `12h`, `30m`, `45s`, `3600` (seconds)."""
    if isinstance(value, timedelta):
        delta = value
    else:
        match = _DURATION.fullmatch(value.strip().lower()) if isinstance(value, str) else None
        if match is None:
            raise InvalidInput(
                "a token's lifetime is a whole number of seconds, or of minutes, hours or "
                "days: 45s, 30m, 12h, 90d"
            )
        seconds = int(match[1]) * _UNIT_SECONDS[match[2]]
        delta = timedelta(seconds=min(seconds, MAX_EXPIRES_IN.total_seconds() + 1))
    if not timedelta(0) < delta <= MAX_EXPIRES_IN:
        raise InvalidInput(
            f"a token's lifetime must be more than 0 and at most {MAX_EXPIRES_IN.days}d"
        )
    return delta


def hash_token(token: str) -> str:
    """The stored form of a token: its SHA-256 hex digest."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_actor_name(name: str) -> str:
    """The actor name a token records: an audit-log actor of at most 128 characters."""
    cleaned = clean_actor_id(name)
    if len(cleaned) > MAX_TOKEN_ACTOR:
        raise InvalidInput(f"the token's actor is longer than {MAX_TOKEN_ACTOR} characters")
    return cleaned


def _info(row: ApiToken) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        role=row.role,
        actor=row.actor,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
        expires_at=row.expires_at,
    )


def create_token(
    *,
    role: str,
    actor_name: str,
    by: Actor,
    settings: Settings,
    expires_in: str | timedelta | None = None,
) -> CreatedToken:
    """A new token granting `role`, its calls recorded as `api:<actor_name>`; admin only.

    `expires_in` (see `parse_expires_in`): it is refused from then on; None: it never expires.
    """
    with audited_refusals(
        actor=by.id,
        action=CREATE_ACTION,
        target="api_token:?",
        detail={"via": by.via},
        settings=settings,
    ):
        require_role(by, Role.ADMIN, action="creating an API token")
        if role not in API_TOKEN_ROLES:
            raise InvalidInput(f"role must be one of {', '.join(API_TOKEN_ROLES)}")
        name = token_actor_name(actor_name)
        lifetime = None if expires_in is None else parse_expires_in(expires_in)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(id=secrets.token_hex(8), hash=hash_token(token), role=role, actor=name)
    with session_scope(settings) as session:
        row.created_at = utcnow()
        row.expires_at = None if lifetime is None else row.created_at + lifetime
        session.add(row)
        session.flush()
        detail = {"via": by.via, "role": role, "token_actor": ACTOR_PREFIX + name}
        if row.expires_at is not None:
            detail["expires_at"] = row.expires_at.isoformat()
        record_audit(
            actor=by.id,
            action=CREATE_ACTION,
            target=f"api_token:{row.id}",
            outcome="completed",
            detail=detail,
            session=session,
        )
    return CreatedToken(
        id=row.id,
        token=token,
        role=role,
        actor=name,
        created_at=row.created_at,
        expires_at=row.expires_at,
    )


def list_tokens(*, by: Actor, settings: Settings) -> list[TokenInfo]:
    """Every token, newest first (revoked ones included); admin only."""
    with audited_refusals(
        actor=by.id,
        action=LIST_ACTION,
        target="api_token:*",
        detail={"via": by.via},
        settings=settings,
    ):
        require_role(by, Role.ADMIN, action="listing API tokens")
    with session_scope(settings) as session:
        rows = session.scalars(
            sa.select(ApiToken).order_by(ApiToken.created_at.desc(), ApiToken.id)
        ).all()
        return [_info(row) for row in rows]


def revoke_token(token_id: str, *, by: Actor, settings: Settings) -> tuple[TokenInfo, bool]:
    """Revoke a token by id; returns it and whether this call revoked it (False: it already was)."""
    target = f"api_token:{token_id}"
    with audited_refusals(
        actor=by.id, action=REVOKE_ACTION, target=target, detail={"via": by.via}, settings=settings
    ):
        require_role(by, Role.ADMIN, action="revoking an API token")
        if not isinstance(token_id, str) or not 1 <= len(token_id) <= 32 or not token_id.isalnum():
            raise InvalidInput("a token id is 1 to 32 letters and digits (see `api token list`)")
        with session_scope(settings) as session:
            row = session.get(ApiToken, token_id, with_for_update=True)
            if row is None:
                raise ApiTokenNotFound(f"no API token with id {token_id}")
            revoked_now = row.revoked_at is None
            if revoked_now:
                row.revoked_at = utcnow()
            record_audit(
                actor=by.id,
                action=REVOKE_ACTION,
                target=target,
                outcome="completed" if revoked_now else "no_op",
                detail={"via": by.via, "token_actor": ACTOR_PREFIX + row.actor},
                session=session,
            )
            return _info(row), revoked_now


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header; Unauthorized otherwise."""
    if not authorization:
        raise Unauthorized("no credential: send Authorization: Bearer <token>")
    scheme, _, value = authorization.strip().partition(" ")
    value = value.strip()
    if scheme.lower() != "bearer" or not value:
        raise Unauthorized("the Authorization header must be Bearer <token>")
    return value


def authenticate(presented: str, settings: Settings) -> Actor:
    """The actor a presented token stands for; Unauthorized when unknown, revoked or expired."""
    return authenticate_token(presented, settings)[0]


def authenticate_token(presented: str, settings: Settings) -> tuple[Actor, str]:
    """The actor and the token's id (what idempotency keys are kept under); as `authenticate`."""
    if len(presented) > MAX_PRESENTED or not presented.isascii():
        raise Unauthorized("the token is not valid")
    digest = hash_token(presented)
    with session_scope(settings) as session:
        row = session.scalar(sa.select(ApiToken).where(ApiToken.hash == digest))
        if row is None or not hmac.compare_digest(row.hash, digest):
            raise Unauthorized("the token is not valid")
        if row.revoked_at is not None:
            raise Unauthorized("the token was revoked")
        if row.expires_at is not None and row.expires_at <= utcnow():
            at = row.expires_at.isoformat(timespec="seconds")
            raise Unauthorized(f"the token expired at {at}: create a new one")
        actor = Actor(id=ACTOR_PREFIX + row.actor, role=Role[row.role.upper()], via="api")
        return actor, row.id
