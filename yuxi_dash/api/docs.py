"""The API's OpenAPI declarations and its `/docs` page, served without a CDN.

What `api.app` routes declare beyond their code: the bearer security scheme
(`BEARER`), the error body (`ErrorBody`), the compress answer, every error
status with its codes (`COMPRESS_RESPONSES`), and the caller-id headers
(`caller_id_parameters`). `install_docs(app)` adds `GET /docs`: FastAPI's own
Swagger UI page, its JS, CSS and icon served from the `fastapi-offline`
package on disk under `/docs/assets/` (HAZARDS item 19: no CDN can be
reached), and the validator badge off, so the page fetches nothing off-host.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

DOCS_URL = "/docs"
ASSETS_URL = "/docs/assets"
BEARER_SCHEME = "bearerToken"
BEARER = HTTPBearer(
    scheme_name=BEARER_SCHEME,
    description="A service token: `yuxi-dash api token create --role ROLE --actor NAME`.",
    auto_error=False,  # the route itself answers 401 (and audits it)
)
CALLER_ID_PATTERN = "^[\\x21-\\x7e]{1,128}$"


class ErrorDetail(BaseModel):
    """What went wrong: a stable `code` and a sentence."""

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every error of the API: `{"detail": {"code", "message"}}`."""

    detail: ErrorDetail


class CompressAnswer(BaseModel):
    """A compress that ran: the fields `yuxi-dash compress --json` prints."""

    thread_id: str
    status: str  # completed | no_op
    before_tokens: int
    after_tokens: int
    compressed_messages: int
    file_path: str | None
    reason: str | None
    checkpoint_id: str | None


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


COMPRESS_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "model": CompressAnswer,
        "description": "Compressed, or nothing to summarize (`no_op`).",
        "headers": {
            "Idempotent-Replayed": {
                "description": "`true` when this is the stored answer of a repeated key.",
                "schema": {"type": "string"},
            }
        },
    },
    400: _error("`invalid_input`: a bad header, body, unknown body field or thread id."),
    401: {
        **_error("`unauthorized`: no token, or an unknown, revoked or expired one."),
        "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
    },
    403: _error("`forbidden`: the token's role may not compress (a viewer's)."),
    404: _error("`thread_not_found`, `thread_deleted`, or `not_found` (no such route)."),
    405: _error("`method_not_allowed`: compress is POST."),
    409: _error("`thread_busy`, `stale_state`, `idempotency_in_progress`, `platform_changed`."),
    422: _error("`compression_unsupported`, `thread_attached`, `idempotency_key_reused`."),
    500: _error("`internal_error`, `platform_misconfigured`."),
    502: _error("`summarizer_failed`, `platform_bad_response`, `platform_auth_failed`."),
    503: _error("`store_unavailable`, `workdir_unavailable`, `platform_unavailable`."),
    504: _error("`platform_outcome_unknown`: an attached thread's platform did not answer."),
}


def caller_id_parameters() -> list[dict[str, Any]]:
    """The optional `Idempotency-Key` and `X-Request-Id` request headers."""
    described = {
        "Idempotency-Key": "A repeated key from the same token gets the first answer back.",
        "X-Request-Id": "The caller's request id, kept in the call's audit row.",
    }
    return [
        {
            "name": name,
            "in": "header",
            "required": False,
            "description": f"{text} 1 to 128 visible ASCII characters.",
            "schema": {"type": "string", "pattern": CALLER_ID_PATTERN},
        }
        for name, text in described.items()
    ]


def json_body(model: type[BaseModel], description: str) -> dict[str, Any]:
    """An optional JSON request body of `model`, for a route's `openapi_extra`."""
    return {
        "requestBody": {
            "required": False,
            "description": description,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


def _assets_directory() -> str:
    return str(files("fastapi_offline").joinpath("static"))


def install_docs(app: FastAPI) -> None:
    """`GET /docs` (Swagger UI over `app.openapi_url`) with its assets from disk."""
    app.mount(ASSETS_URL, StaticFiles(directory=_assets_directory()), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} API",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from outside
        )
