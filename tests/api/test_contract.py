"""The API's hardened contract through a real uvicorn server (issues 36 and 37).

Thread ids holding `/` (sent raw and as %2F), router refusals under /api/ audited,
/readyz without and with a token, expired tokens, unknown body fields, the OpenAPI
document and the offline /docs page.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx
import pytest
import sqlalchemy as sa

from tests.api.test_app import (
    ADMIN,
    COMPRESS,
    _bearer,
    _detail,
    _last_audit,
    _token,
    api,
)
from tests.service.builders import history_files, seed_thread, snapshot_of_store
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.api.app import ROUTE_ACTION
from yuxi_dash.api.service_tokens import create_token
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, utcnow

__all__ = ["api"]  # the fixture, shared with test_app

ERROR_STATUSES = ("400", "401", "403", "404", "409", "422", "502", "503", "504")


def _route_refusals() -> list[AuditEntry]:
    wait_for_pending_audit()
    with session_scope() as session:
        query = sa.select(AuditEntry).where(AuditEntry.action == ROUTE_ACTION)
        return list(session.scalars(query.order_by(AuditEntry.id)))


# --- thread ids with "/" -----------------------------------------------------------


@pytest.mark.parametrize("quoted", [False, True], ids=["raw", "percent-encoded"])
def test_a_thread_id_with_a_slash_is_compressed(api: httpx.Client, quoted: bool) -> None:
    thread_id = "team-7/support/42"  # as an attached platform may name its threads
    seed_thread(thread_id)
    sent = quote(thread_id, safe="") if quoted else thread_id  # platform.client quotes it
    response = api.post(COMPRESS.format(sent), headers=_bearer(_token()))
    assert response.status_code == 200, response.text
    assert response.json()["thread_id"] == thread_id
    assert response.json()["status"] == "completed"
    audit = _last_audit(thread_id)
    assert (audit.actor, audit.action, audit.outcome) == ("api:bot", "compress", "completed")
    assert _route_refusals() == []


# --- refusals of the router ---------------------------------------------------------


def test_a_refusal_of_the_router_under_api_is_one_audit_row(api: httpx.Client) -> None:
    seed_thread("a/b")
    token = _token(name="prober")
    missing = api.post(
        "/api/chat/thread/a/b?key=hunter2",  # no /compress: no route
        headers={**_bearer(token), "X-Request-Id": "req-404"},
    )
    assert missing.status_code == 404 and _detail(missing)["code"] == "not_found"
    wrong_method = api.get(COMPRESS.format("a/b"))  # no token either
    assert wrong_method.status_code == 405
    assert _detail(wrong_method)["code"] == "method_not_allowed"
    assert api.get("/nowhere").status_code == 404  # not under /api/: not audited
    rows = _route_refusals()
    assert [(r.actor, r.outcome, r.target, r.detail["code"], r.detail["method"]) for r in rows] == [
        ("api:prober", "refused", "route:/api/chat/thread/a/b", "not_found", "POST"),
        (
            "api:unauthenticated",
            "refused",
            "route:/api/chat/thread/a/b/compress",
            "method_not_allowed",
            "GET",
        ),
    ]
    assert rows[0].detail["request_id"] == "req-404" and rows[0].detail["via"] == "api"
    dumped = json.dumps([(r.target, r.detail) for r in rows])
    assert "hunter2" not in dumped and token not in dumped and token[4:] not in dumped


# --- /readyz ------------------------------------------------------------------------


def test_readyz_shows_details_only_to_a_token(api: httpx.Client) -> None:
    for headers in ({}, _bearer("yxd_not-a-token"), {"Authorization": "Basic eDp5"}):
        anonymous = api.get("/readyz", headers=headers)
        assert (anonymous.status_code, anonymous.json()) == (200, {"ready": True})
    held = api.get("/readyz", headers=_bearer(_token("viewer", "probe")))
    assert held.status_code == 200
    assert held.json() == {"status": "ready", "checks": {"database": "ok", "workdir": "ok"}}


# --- expiry -------------------------------------------------------------------------


def test_an_expired_token_is_401_and_audited(api: httpx.Client) -> None:
    seed_thread()
    created = create_token(
        role="operator",
        actor_name="short",
        by=ADMIN,
        settings=get_settings(),
        expires_in=timedelta(seconds=3),
    )
    assert created.expires_at is not None
    first = api.post(COMPRESS.format("t1"), headers=_bearer(created.token))
    assert first.status_code == 200, first.text
    time.sleep(max(0.0, (created.expires_at - utcnow()).total_seconds()) + 0.2)
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers=_bearer(created.token))
    assert response.status_code == 401 and _detail(response)["code"] == "unauthorized"
    assert "expired" in _detail(response)["message"]
    assert response.headers["www-authenticate"] == "Bearer"
    assert snapshot_of_store() == before
    audit = _last_audit()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (
        "api:unauthenticated",
        "refused",
        "unauthorized",
    )
    assert api.get("/readyz", headers=_bearer(created.token)).json() == {"ready": True}


# --- unknown body fields ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"checkpoint": "x"}, '"checkpoint"'),  # a typo of expected_checkpoint_id
        ({"expected_checkpoint_id": None, "force": True}, '"force"'),
        ({"expected_checkpoint_id": 7}, '"expected_checkpoint_id"'),
    ],
    ids=["typo", "extra", "wrong-type"],
)
def test_an_unknown_or_wrong_body_field_is_400_naming_it(
    api: httpx.Client, body: dict[str, Any], named: str
) -> None:
    seed_thread()
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers=_bearer(_token()), json=body)
    assert response.status_code == 400, response.text
    detail = _detail(response)
    assert detail["code"] == "invalid_input" and named in detail["message"]
    assert snapshot_of_store() == before and history_files() == []
    audit = _last_audit()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (
        "api:bot",
        "refused",
        "invalid_input",
    )


# --- the OpenAPI document and /docs -------------------------------------------------


def test_the_openapi_document_declares_auth_body_errors_and_headers(api: httpx.Client) -> None:
    document = api.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    ((name, scheme),) = schemes.items()
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    operation = document["paths"]["/api/chat/thread/{thread_id}/compress"]["post"]
    assert operation["security"] == [{name: []}]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["additionalProperties"] is False
    assert set(body["properties"]) == {"expected_checkpoint_id"}
    responses = operation["responses"]
    assert responses["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/CompressAnswer"
    )
    for status in ERROR_STATUSES:
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema["$ref"] == "#/components/schemas/ErrorBody", status
    error = document["components"]["schemas"]["ErrorDetail"]
    assert set(error["required"]) == {"code", "message"}
    parameters = {(p["in"], p["name"]) for p in operation["parameters"]}
    assert parameters == {
        ("path", "thread_id"),
        ("header", "Idempotency-Key"),
        ("header", "X-Request-Id"),
    }
    readyz = document["paths"]["/readyz"]["get"]
    assert {} in readyz["security"] and {name: []} in readyz["security"]


def test_docs_and_every_asset_it_references_are_served_from_this_host(
    api: httpx.Client,
) -> None:
    page = api.get("/docs")
    assert page.status_code == 200 and "SwaggerUIBundle" in page.text
    assert "http://" not in page.text and "https://" not in page.text
    references = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    references += re.findall(r"""\burl:\s*['"]([^'"]+)['"]""", page.text)
    assert len(references) >= 4  # the CSS, the icon, the JS bundle, the OpenAPI document
    base = str(api.base_url)
    for reference in references:
        url = urljoin(base + "/docs", reference)
        assert urlsplit(url).netloc == api.base_url.netloc.decode(), reference
        asset = api.get(url)
        assert asset.status_code == 200 and asset.content, reference
    assert "swagger-ui-bundle.js" in " ".join(references)
