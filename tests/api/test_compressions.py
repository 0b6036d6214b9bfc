"""`GET /api/chat/thread/{id}/compressions` (yuxi_dash.api.compressions) on real uvicorn.

On SQLite and the real PostgreSQL: the same body as `yuxi-dash compressions --json`, any
token role, 401 / 400 / 404 each audited once, thread ids holding `/`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import pytest
import sqlalchemy as sa

from tests.api.test_app import _bearer, _detail, _token, api
from tests.service.builders import OPERATOR, seed_thread
from tests.store.compression_builders import cited_thread, item, put_record
from yuxi_dash import sources
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.cli import main
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry

__all__ = ["api"]  # the fixture, shared with test_app

URL = "/api/chat/thread/{}/compressions"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _refusals() -> list[tuple[str, str, str, str]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.actor, AuditEntry.target, AuditEntry.outcome, AuditEntry.detail)
            .where(AuditEntry.action == "api.compressions")
            .order_by(AuditEntry.id)
        ).all()
    return [(actor, target, outcome, detail["code"]) for actor, target, outcome, detail in rows]


def test_the_body_is_the_cli_json_for_any_role(
    api: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_thread(messages=cited_thread(), keep_messages=4)
    assert sources.compress_thread_context("t1", actor=OPERATOR).status == "completed"
    put_record("t1", T0 + timedelta(days=3650), [item("later", "lost", cited=True)])
    assert main(["compressions", "t1", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    for role in ("viewer", "operator", "admin"):
        response = api.get(URL.format("t1"), headers=_bearer(_token(role, f"reader-{role}")))
        assert response.status_code == 200, response.text
        assert response.json() == cli
    body = cli
    assert body["thread_id"] == "t1" and body["total"] == 2
    newest, manual = body["compressions"]  # newest first
    assert newest["ledger"]["items"][0]["value"] == "later"
    assert manual["trigger"] == "manual" and manual["summary"]
    for entry in manual["ledger"]["items"]:
        if entry["state"] == "recoverable":
            assert entry["file"] and entry["line"] >= 1
    paged = api.get(URL.format("t1"), params={"limit": 1, "offset": 1}, headers=_bearer(_token()))
    assert [r["id"] for r in paged.json()["compressions"]] == [manual["id"]]
    assert _refusals() == []  # a read that answers is not audited


@pytest.mark.parametrize("quoted", [False, True], ids=["raw", "percent-encoded"])
def test_a_thread_id_with_a_slash(api: httpx.Client, quoted: bool) -> None:
    thread_id = "team-7/support/42"
    put_record(thread_id, T0, [item("x", "visible")])
    sent = quote(thread_id, safe="") if quoted else thread_id
    response = api.get(URL.format(sent), headers=_bearer(_token("viewer")))
    assert response.status_code == 200, response.text
    assert response.json()["thread_id"] == thread_id and response.json()["total"] == 1


def test_refusals_are_typed_and_audited_once(api: httpx.Client) -> None:
    seed_thread("gone", status="deleted")
    viewer = _bearer(_token("viewer", "reader"))
    cases = [
        (URL.format("t1"), {}, 401, "unauthorized"),
        (URL.format("t1"), {"Authorization": "Bearer yxd_not-a-token"}, 401, "unauthorized"),
        (URL.format("nope"), viewer, 404, "thread_not_found"),
        (URL.format("gone"), viewer, 404, "thread_deleted"),
        (URL.format("t" * 300), viewer, 400, "invalid_input"),
        (URL.format("bad%00id"), viewer, 400, "invalid_input"),
    ]
    for url, headers, status, code in cases:
        response = api.get(url, headers=headers)
        assert response.status_code == status, (url, response.text)
        assert _detail(response)["code"] == code
        if status == 401:
            assert response.headers["www-authenticate"] == "Bearer"
    rows = _refusals()
    assert [(actor, outcome, code) for actor, _target, outcome, code in rows] == [
        ("api:unauthenticated", "refused", "unauthorized"),
        ("api:unauthenticated", "refused", "unauthorized"),
        ("api:reader", "refused", "thread_not_found"),
        ("api:reader", "refused", "thread_deleted"),
        ("api:reader", "refused", "invalid_input"),
        ("api:reader", "refused", "invalid_input"),
    ]
    assert rows[2][1] == "thread:nope"


def test_a_bad_limit_is_400_and_the_route_is_documented(api: httpx.Client) -> None:
    put_record("t1", T0, [item("x", "visible")])
    response = api.get(URL.format("t1"), params={"limit": 0}, headers=_bearer(_token()))
    assert response.status_code == 400 and _detail(response)["code"] == "invalid_input"
    document = api.get("/openapi.json").json()
    operation = document["paths"]["/api/chat/thread/{thread_id}/compressions"]["get"]
    assert {"200", "400", "401", "404", "503"} <= set(operation["responses"])
    assert operation["security"]
    wrong_method = api.post(URL.format("t1"), headers=_bearer(_token()))
    assert wrong_method.status_code == 405
