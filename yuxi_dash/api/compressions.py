"""`GET /api/chat/thread/{thread_id}/compressions`: a thread's compression records.

`router` is included by `api.app.create_app`. The body is what `yuxi-dash compressions
THREAD --json` prints (`api.thread_compressions`):
`{"thread_id", "total", "compressions": [...]}`, newest first, each record with its
`summary` and `ledger`; `?limit=` (1..1000, default 20) and `?offset=` page it. A service
token of any role may read (viewer and up, as the thread detail). The thread id may hold
`/`. Errors are `{"detail": {"code", "message"}}`: 401 no usable token, 400 an invalid
thread id, 404 an unknown (`thread_not_found`) or deleted (`thread_deleted`) thread, 503
the database. Each refusal is one audit row (action `api.compressions`; a refused
credential as `api:unauthenticated`); a read that answers is not audited, as on the pages.
"""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query, Request, Security
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from yuxi_dash.access.audit import audited_refusals, thread_target
from yuxi_dash.api import docs
from yuxi_dash.api.service_tokens import authenticate_token, bearer_token
from yuxi_dash.api.thread_compressions import DEFAULT_LIMIT, thread_compressions
from yuxi_dash.errors import StoreUnavailable, Unauthorized, YuxiDashError
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope

COMPRESSIONS_ACTION = "api.compressions"  # the audit action of a refused read
UNAUTHENTICATED = "api:unauthenticated"  # as `api.app` names a caller without a usable token
MAX_LIMIT = 1000

router = APIRouter()


class CompressionsAnswer(BaseModel):
    """A thread's compression records, newest first (`yuxi-dash compressions --json`)."""

    thread_id: str
    total: int
    compressions: list[dict[str, Any]]


def _error(description: str) -> dict[str, Any]:
    return {"model": docs.ErrorBody, "description": description}


RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": CompressionsAnswer, "description": "The records (none: an empty list)."},
    400: _error("`invalid_input`: a bad thread id, limit or offset."),
    401: _error("`unauthorized`: no token, or an unknown, revoked or expired one."),
    404: _error("`thread_not_found` or `thread_deleted`."),
    503: _error("`store_unavailable`: the database cannot be reached."),
}


def _read(
    thread_id: str, authorization: list[str], limit: int, offset: int, settings: Settings
) -> dict[str, Any]:
    """The caller's token checked, then the thread's records; each refusal one audit row."""
    target = thread_target(thread_id)
    with audited_refusals(
        actor=UNAUTHENTICATED,
        action=COMPRESSIONS_ACTION,
        target=target,
        detail={"via": "api"},
        settings=settings,
    ):
        if len(authorization) > 1:
            raise Unauthorized("send one Authorization header")
        presented = bearer_token(authorization[0] if authorization else None)
        try:
            actor, _token_id = authenticate_token(presented, settings)  # any role may read
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            raise StoreUnavailable("database unavailable; check YUXI_DASH_DATABASE_URL") from exc
    with audited_refusals(
        actor=actor.id,
        action=COMPRESSIONS_ACTION,
        target=target,
        detail={"via": "api", "role": actor.role.label},
        settings=settings,
    ):
        try:
            with session_scope(settings) as session:
                return thread_compressions(session, thread_id, limit=limit, offset=offset)
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
            raise StoreUnavailable("database unavailable; check YUXI_DASH_DATABASE_URL") from exc


@router.get(
    "/api/chat/thread/{thread_id:path}/compressions",
    summary="A thread's compression records",
    dependencies=[Security(docs.BEARER)],
    responses=RESPONSES,
)
def compressions(
    thread_id: Annotated[str, PathParam(description="The thread's id; it may hold `/` (or %2F).")],
    request: Request,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many.")] = (
        DEFAULT_LIMIT
    ),
    offset: Annotated[int, Query(ge=0, le=2**63 - 1, description="Skip the newest N.")] = 0,
) -> JSONResponse:
    """What each compression of the thread kept in view, left recoverable or lost.

    Newest first; each record has its summary and its evidence ledger (items with `kind`,
    `value`, `state`, `cited`, and `file` and `line` where recoverable). Any token role.
    """
    settings: Settings = request.app.state.settings
    try:
        body = _read(thread_id, request.headers.getlist("authorization"), limit, offset, settings)
    except YuxiDashError as exc:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse(
            {"detail": {"code": exc.code, "message": exc.message}},
            status_code=exc.status_code,
            headers=headers,
        )
    return JSONResponse(body)
