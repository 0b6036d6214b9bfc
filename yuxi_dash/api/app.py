"""The FastAPI application of `yuxi-dash api serve`: `create_app()`.

Routes: `POST /api/chat/thread/{thread_id}/compress` (the platform's contract; the id may hold
`/`), `GET /api/chat/thread/{thread_id}/compressions` (`api.compressions`), `GET /healthz`,
`GET /readyz` (database and workdir: `{"ready": bool}`, details only with a token),
`GET /metrics` (`api.metrics`) and `GET /docs` (`api.docs`, which also holds the OpenAPI
declarations). Compress needs `Authorization: Bearer <token>`
(`api.service_tokens`); the body is optional JSON `{"expected_checkpoint_id": ...}`
(`CompressBody`: at most 64 KiB, any other field is 400 naming it). An answer is what `compress --json` prints, an error
`{"detail": {"code", "message"}}` with our typed error's status (docs/operations.md).
Every compress call is one audit row: the service writes it for an authenticated actor
(`api:<name>`), this module for a refused credential, header or body, a replay, and a refusal
of the router under `/api/` (no route, wrong method: action `api.request`). A repeated
`Idempotency-Key` replays the first answer (`api.idempotency`); the probes are not audited.
Nothing here logs a token, a body or a query string.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, FastAPI, Request, Security
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from yuxi_dash.access.audit import audited_refusals, record_audit, record_audit_eventually
from yuxi_dash.access.roles import Actor
from yuxi_dash.api import docs, idempotency
from yuxi_dash.api.compressions import router as compressions_router
from yuxi_dash.api.metrics import router as metrics_router
from yuxi_dash.api.service_tokens import authenticate_token, bearer_token
from yuxi_dash.errors import InvalidInput, StoreUnavailable, Unauthorized, YuxiDashError
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.outside_text import escaped_controls
from yuxi_dash.service import thread_target
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sources import compress_thread_context
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.origin import COMPRESS_ACTION

log = logging.getLogger("yuxi_dash.api")

UNAUTHENTICATED = "api:unauthenticated"  # the audit actor of a call without a usable token
ROUTE_ACTION = "api.request"  # the audit action of a refusal by the router (no route, method)
MAX_BODY_BYTES = 64 * 1024
# the caller's ids: header -> audit detail key
CALLER_HEADERS = {"X-Request-Id": "request_id", "Idempotency-Key": "idempotency_key"}
_CALLER_ID = re.compile(r"[\x21-\x7e]{1,128}")
REPLAYED_HEADER = "Idempotent-Replayed"

router = APIRouter()


class CompressBody(BaseModel):
    """The optional JSON body of a compress call; any other field is refused (400)."""

    model_config = ConfigDict(extra="forbid")

    expected_checkpoint_id: str | None = Field(
        None,
        description="The checkpoint the caller last saw: 409 stale_state when the thread moved on.",
    )


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"detail": {"code": code, "message": message, **extra}}


def error_response(exc: YuxiDashError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return JSONResponse(
        error_body(exc.code, exc.message), status_code=exc.status_code, headers=headers
    )


@contextmanager
def store_errors() -> Iterator[None]:
    """A database that cannot be reached is StoreUnavailable (503), never a traceback."""
    try:
        yield
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise StoreUnavailable("database unavailable; check YUXI_DASH_DATABASE_URL") from exc


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def caller_ids(request: Request) -> tuple[dict[str, str], str | None]:
    """The caller's usable `X-Request-Id` / `Idempotency-Key`, and what is wrong with one."""
    ids: dict[str, str] = {}
    problem = None
    for header, key in CALLER_HEADERS.items():
        values = request.headers.getlist(header)
        if len(values) > 1:
            problem = f"send one {header} header"
        elif values and not _CALLER_ID.fullmatch(values[0]):
            problem = f"{header} must be 1 to 128 visible ASCII characters"
        elif values:
            ids[key] = values[0]
    return ids, problem


def _caller(
    authorization: list[str], target: str, ids: dict[str, str], settings: Settings
) -> tuple[Actor, str]:
    """The token's actor and id; a refused credential is one audit row as `api:unauthenticated`."""
    with audited_refusals(
        actor=UNAUTHENTICATED,
        action=COMPRESS_ACTION,
        target=target,
        detail={"via": "api", **ids},
        settings=settings,
    ):
        if len(authorization) > 1:
            raise Unauthorized("send one Authorization header")
        presented = bearer_token(authorization[0] if authorization else None)
        with store_errors():
            return authenticate_token(presented, settings)


def _detail(actor: Actor, ids: dict[str, str]) -> dict[str, Any]:
    return {"via": "api", "role": actor.role.label, **ids}


def _expected_checkpoint(
    body: bytes | None,
    problem: str | None,
    actor: Actor,
    target: str,
    ids: dict[str, str],
    settings: Settings,
) -> Any:
    """`expected_checkpoint_id` from the optional JSON body; a bad header or body is one audit row."""
    with audited_refusals(
        actor=actor.id,
        action=COMPRESS_ACTION,
        target=target,
        detail=_detail(actor, ids),
        settings=settings,
    ):
        if problem is not None:
            raise InvalidInput(problem)
        if body is None:
            raise InvalidInput(f"the body is larger than {MAX_BODY_BYTES} bytes")
        if not body.strip():
            return None
        try:
            payload = json.loads(body)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise InvalidInput("the body is not JSON") from None
        if not isinstance(payload, dict):
            raise InvalidInput('the body must be a JSON object: {"expected_checkpoint_id": ...}')
        try:
            return CompressBody.model_validate(payload).expected_checkpoint_id  # the service
        except ValidationError as exc:  # checks what it names (an identifier)
            raise InvalidInput(body_problem(exc)) from None


def _field_name(loc: tuple[Any, ...]) -> str:
    """A field's name as the caller sent it, quoted and clipped (it is their text)."""
    return json.dumps(".".join(str(part) for part in loc) or "body")[:80]


def body_problem(exc: ValidationError) -> str:
    """One sentence naming the fields a body got wrong (never their values)."""
    errors = exc.errors(include_input=False, include_url=False)
    unknown = [_field_name(e["loc"]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        allowed = ", ".join(CompressBody.model_fields)
        return f"unknown field in the body: {', '.join(unknown[:5])} (it takes {allowed})"
    first = errors[0]
    return f"the body's field {_field_name(first['loc'])} is not valid: {first['msg']}"


async def _read_body(request: Request) -> bytes | None:
    """The request body, or None once it passes MAX_BODY_BYTES (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _compress(
    thread_id: str, actor: Actor, expected: Any, ids: dict[str, str], settings: Settings
) -> dict[str, Any]:
    with store_errors():
        result = compress_thread_context(
            thread_id,
            actor=actor,
            expected_checkpoint_id=expected,
            settings=settings,
            caller_ids=ids,
        )
    return result.to_dict()


def _claim(
    token_id: str,
    thread_id: str,
    expected: Any,
    actor: Actor,
    ids: dict[str, str],
    settings: Settings,
) -> JSONResponse | None:
    """The stored first answer of this token's Idempotency-Key (audited), or None: run it."""
    target = thread_target(thread_id)
    key = ids["idempotency_key"]
    with (
        audited_refusals(
            actor=actor.id,
            action=COMPRESS_ACTION,
            target=target,
            detail=_detail(actor, ids),
            settings=settings,
        ),
        store_errors(),
    ):
        print_ = idempotency.fingerprint(thread_id, expected)
        replay = idempotency.claim(settings, token_id, key, print_)
    if replay is None:
        return None
    detail = replay.body.get("detail")
    code = detail.get("code") if isinstance(detail, dict) else replay.body.get("status")
    record_audit(
        actor=actor.id,
        action=COMPRESS_ACTION,
        target=target,
        outcome="replayed",
        detail={**_detail(actor, ids), "status": replay.status_code, "code": code},
        settings=settings,
    )
    return JSONResponse(
        replay.body, status_code=replay.status_code, headers={REPLAYED_HEADER: "true"}
    )


def _settle(token_id: str, key: str, response: JSONResponse, settings: Settings) -> None:
    """Store the answer under the claimed key; a failure leaves it in progress (logged)."""
    try:
        body = json.loads(bytes(response.body))
        idempotency.settle(settings, token_id, key, response.status_code, body)
    except Exception as exc:  # noqa: BLE001 - the caller still gets its answer
        log.warning("could not store an idempotent answer (%s)", type(exc).__name__)


def _release(token_id: str, key: str, settings: Settings) -> None:
    try:
        idempotency.release(settings, token_id, key)
    except Exception as exc:  # noqa: BLE001 - the key then stays in progress (logged)
        log.warning("could not release an idempotency key (%s)", type(exc).__name__)


@router.post(
    "/api/chat/thread/{thread_id:path}/compress",
    summary="Compress a thread's context now",
    dependencies=[Security(docs.BEARER)],
    responses=docs.COMPRESS_RESPONSES,
    openapi_extra={
        "parameters": docs.caller_id_parameters(),
        **docs.json_body(CompressBody, "Optional; at most 64 KiB. Other fields are refused."),
    },
)
async def compress(
    thread_id: Annotated[str, PathParam(description="The thread's id; it may hold `/` (or %2F).")],
    request: Request,
) -> JSONResponse:
    """Summarize the thread's history now: the platform's compress contract.

    Needs a token of the operator or admin role. Every call is one audit row.
    """
    settings = _settings(request)
    target = thread_target(thread_id)
    ids, problem = caller_ids(request)
    key = ids.get("idempotency_key")
    claimed: str | None = None  # the token id this call claimed `key` under
    try:
        authorization = request.headers.getlist("authorization")
        actor, token_id = await run_in_threadpool(_caller, authorization, target, ids, settings)
        body = await _read_body(request)
        expected = await run_in_threadpool(
            _expected_checkpoint, body, problem, actor, target, ids, settings
        )
        if key is not None:
            replay = await run_in_threadpool(
                _claim, token_id, thread_id, expected, actor, ids, settings
            )
            if replay is not None:
                return replay
            claimed = token_id
        response = JSONResponse(
            await run_in_threadpool(_compress, thread_id, actor, expected, ids, settings)
        )
    except YuxiDashError as exc:
        response = error_response(exc)
    except Exception as exc:  # noqa: BLE001 - audited by the service; its text may hold data
        if claimed is not None and key is not None:
            await run_in_threadpool(_release, claimed, key, settings)
        return await _unexpected(request, exc)
    if claimed is not None and key is not None:
        await run_in_threadpool(_settle, claimed, key, response, settings)
    return response


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is alive and answering (no database or workdir check: see /readyz)."""
    return {"status": "ok"}


def _database_ready(settings: Settings) -> bool:
    try:
        with session_scope(settings) as session:
            session.execute(sa.text("SELECT 1"))
    except Exception:  # noqa: BLE001 - any failure means not ready; its text may hold the URL
        log.warning("readiness: the database is unavailable")
        return False
    return True


def _workdir_ready(settings: Settings) -> bool:
    try:
        Workdir(settings.workdir).ensure_writable()
    except YuxiDashError:
        log.warning("readiness: the workdir is unavailable")
        return False
    return True


def _token_holder(request: Request, settings: Settings) -> Actor | None:
    """The actor of the request's usable token, else None (nothing raised, nothing audited)."""
    authorization = request.headers.getlist("authorization")
    if len(authorization) != 1:
        return None
    try:
        return authenticate_token(bearer_token(authorization[0]), settings)[0]
    except YuxiDashError:
        return None
    except Exception as exc:  # noqa: BLE001 - a database that is down: no details, not ready
        log.warning("could not check a token (%s)", type(exc).__name__)
        return None


READY_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": '`{"ready": true}`; with a token, `{"status", "checks"}`.'},
    503: {"description": '`{"ready": false}`; with a token, `not_ready` naming the checks.'},
}


@router.get(
    "/readyz",
    responses=READY_RESPONSES,
    openapi_extra={"security": [{}, {docs.BEARER_SCHEME: []}]},  # a token adds the details
)
def readyz(request: Request) -> JSONResponse:
    """Ready: the database answers and the workdir is writable (200), else 503.

    Without a usable token only `{"ready": true|false}`; with a token of any role which
    check failed too (the details say where the database and workdir stand).
    """
    settings = _settings(request)
    holder = _token_holder(request, settings)
    checks = {
        "database": "ok" if _database_ready(settings) else "unavailable",
        "workdir": "ok" if _workdir_ready(settings) else "unavailable",
    }
    failing = [name for name, state in checks.items() if state != "ok"]
    if holder is None:
        return JSONResponse({"ready": not failing}, status_code=503 if failing else 200)
    if failing:
        message = f"not ready: {' and '.join(failing)} unavailable"
        return JSONResponse(error_body("not_ready", message, checks=checks), status_code=503)
    return JSONResponse({"status": "ready", "checks": checks})


def _under_api(request: Request) -> bool:
    path: str = request.scope.get("path", "")
    return path == "/api" or path.startswith("/api/")


def _audit_route_refusal(request: Request, code: str, status_code: int) -> None:
    """One audit row for a refusal the router made under /api/: the path, never its query."""
    settings = _settings(request)
    actor = _token_holder(request, settings)
    ids, _ = caller_ids(request)
    try:
        record_audit_eventually(
            actor=actor.id if actor is not None else UNAUTHENTICATED,
            action=ROUTE_ACTION,
            target=f"route:{escaped_controls(str(request.scope.get('path', '')))}",
            outcome="refused",
            detail={
                "via": "api",
                "method": request.method,
                "status": status_code,
                "code": code,
                **ids,
            },
            settings=settings,
        )
    except Exception:  # noqa: BLE001 - the refusal must reach the caller, not the hiccup
        log.error("audit row for a refused API request could not be written")


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    if _under_api(request):
        await run_in_threadpool(_audit_route_refusal, request, code, exc.status_code)
    return JSONResponse(
        error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers
    )


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """A request FastAPI could not validate: 400 invalid_input naming the fields (not 422)."""
    assert isinstance(exc, RequestValidationError)
    fields = [_field_name(tuple(error.get("loc", ()))) for error in exc.errors()]
    message = f"the request is not valid: {', '.join(fields[:5]) or 'the request'}"
    if _under_api(request):
        await run_in_threadpool(_audit_route_refusal, request, "invalid_input", 400)
    return JSONResponse(error_body("invalid_input", message), status_code=400)


async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected %s in the API", type(exc).__name__)  # no message: it may hold data
    log.debug("unexpected error in the API", exc_info=exc)
    return JSONResponse(error_body("internal_error", "unexpected error"), status_code=500)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API application over `settings` (default: the process's settings)."""
    app = FastAPI(title="yuxi-dash", docs_url=None, redoc_url=None)
    app.state.settings = settings or get_settings()
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
    # --- routers: each feature's APIRouter is included here, one line each ---------
    # (a feature module of this package exposes `router`, e.g. yuxi_dash.api.metrics)
    app.include_router(router)  # compress, /healthz, /readyz
    app.include_router(metrics_router)  # /metrics (a token of any role)
    app.include_router(compressions_router)  # a thread's compression records (any role)
    docs.install_docs(app)  # /docs and its assets, from disk
    return app
