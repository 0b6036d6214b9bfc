"""Idempotency keys of the HTTP API: a repeated key gets the first answer back.

A caller may send `Idempotency-Key`. Keys are kept per token in
`api_idempotency_keys`. The first call with a key claims it (one INSERT: the
primary key makes the claim atomic across workers and replicas), runs, and
stores its answer, status and JSON body, a typed error included. A later call
from the same token with the same key gets that answer back and compresses
nothing; while the first call still runs it is 409 `idempotency_in_progress`;
with another thread or expected checkpoint it is 422 `idempotency_key_reused`.
A call that ended in an unexpected error releases its claim, so a retry runs.
Keys are not expired: a new attempt needs a new key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from yuxi_dash.errors import IdempotencyInProgress, IdempotencyKeyReused
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ApiIdempotencyKey, utcnow


@dataclass(frozen=True)
class Replay:
    """The first answer a key got: sent again as it was."""

    status_code: int
    body: dict[str, Any]


def fingerprint(thread_id: str, expected_checkpoint_id: Any) -> str:
    """What a key was first sent with: the thread and the expected checkpoint (SHA-256 hex)."""
    text = json.dumps([thread_id, expected_checkpoint_id], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


def claim(settings: Settings, token_id: str, key: str, print_: str) -> Replay | None:
    """None when this call now owns the key; the stored answer when it was answered before."""
    for _ in range(2):  # a claim released between our INSERT and our read: one more try
        try:
            with session_scope(settings) as session:
                session.add(ApiIdempotencyKey(token_id=token_id, key=key, fingerprint=print_))
                session.flush()
            return None
        except sa.exc.IntegrityError:
            pass
        with session_scope(settings) as session:
            row = session.get(ApiIdempotencyKey, (token_id, key))
            if row is None:
                continue
            if row.fingerprint != print_:
                raise IdempotencyKeyReused(
                    "this Idempotency-Key was first sent for another request: use a new key"
                )
            if row.status_code is None:
                break
            return Replay(status_code=row.status_code, body=dict(row.response or {}))
    raise IdempotencyInProgress("the first call with this Idempotency-Key has not answered yet")


def settle(settings: Settings, token_id: str, key: str, status_code: int, body: Any) -> None:
    """Store the answer of the call that claimed the key."""
    with session_scope(settings) as session:
        session.execute(
            sa.update(ApiIdempotencyKey)
            .where(ApiIdempotencyKey.token_id == token_id, ApiIdempotencyKey.key == key)
            .values(status_code=status_code, response=body, completed_at=utcnow())
        )


def release(settings: Settings, token_id: str, key: str) -> None:
    """Give up an unanswered claim (the call failed unexpectedly), so a retry runs."""
    with session_scope(settings) as session:
        session.execute(
            sa.delete(ApiIdempotencyKey).where(
                ApiIdempotencyKey.token_id == token_id,
                ApiIdempotencyKey.key == key,
                ApiIdempotencyKey.status_code.is_(None),
            )
        )
