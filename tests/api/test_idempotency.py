"""The API's caller ids and idempotency keys, through a real uvicorn server.

Every call's audit row carries the caller's `X-Request-Id` and
`Idempotency-Key`; a repeated key from the same token replays the first answer
(a success or a typed error) and compresses nothing; the same key from another
token is another call; a key reused for another request, a key still in
progress and a malformed header are typed errors, audited.
"""

from __future__ import annotations

from typing import Any

import httpx
import sqlalchemy as sa

from tests.api.test_app import COMPRESS, _bearer, _detail, _last_audit, _token, api
from tests.service.builders import audit_rows, seed_thread, snapshot_of_store
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.api import idempotency
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AgentRun, ApiIdempotencyKey, ApiToken

__all__ = ["api"]  # the fixture, shared with test_app


def _ids(request_id: str, key: str) -> dict[str, str]:
    return {"X-Request-Id": request_id, "Idempotency-Key": key}


def _completed() -> int:
    wait_for_pending_audit()
    return sum(row.outcome == "completed" for row in audit_rows())


def test_a_repeated_key_replays_the_first_answer_and_compresses_once(api: httpx.Client) -> None:
    seeded = seed_thread()
    token = _token(name="nightly")
    call: dict[str, Any] = {
        "headers": {**_bearer(token), **_ids("req-1", "key-1")},
        "json": {"expected_checkpoint_id": seeded},
    }
    first = api.post(COMPRESS.format("t1"), **call)
    assert first.status_code == 200 and first.json()["status"] == "completed", first.text
    assert "idempotent-replayed" not in first.headers
    audit = _last_audit()
    assert (audit.actor, audit.outcome) == ("api:nightly", "completed")
    assert (audit.detail["request_id"], audit.detail["idempotency_key"]) == ("req-1", "key-1")
    after_first = snapshot_of_store()

    again = api.post(
        COMPRESS.format("t1"), **{**call, "headers": {**call["headers"], "X-Request-Id": "req-2"}}
    )
    assert again.status_code == 200 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert snapshot_of_store() == after_first and _completed() == 1
    replayed = _last_audit()
    assert (replayed.actor, replayed.outcome) == ("api:nightly", "replayed")
    assert (
        replayed.detail["request_id"] == "req-2" and replayed.detail["idempotency_key"] == "key-1"
    )
    assert (replayed.detail["status"], replayed.detail["code"]) == (200, "completed")

    # the same key from another token is another call: it runs (and is stale now)
    other = api.post(
        COMPRESS.format("t1"),
        headers={**_bearer(_token(name="other")), **_ids("r", "key-1")},
        json=call["json"],
    )
    assert other.status_code == 409 and _detail(other)["code"] == "stale_state"
    assert "idempotent-replayed" not in other.headers

    # the first token's key sent for another request
    reused = api.post(
        COMPRESS.format("t1"), headers=call["headers"], json={"expected_checkpoint_id": None}
    )
    assert reused.status_code == 422 and _detail(reused)["code"] == "idempotency_key_reused"
    refused = _last_audit()
    assert (refused.outcome, refused.detail["code"]) == ("refused", "idempotency_key_reused")
    assert refused.detail["idempotency_key"] == "key-1"
    assert snapshot_of_store() == after_first and _completed() == 1


def test_a_typed_error_is_the_first_answer_too(api: httpx.Client) -> None:
    seed_thread()
    with session_scope() as session:
        session.add(AgentRun(thread_id="t1", run_type="chat", status="running"))
    headers = {**_bearer(_token()), **_ids("busy-1", "busy-key")}
    first = api.post(COMPRESS.format("t1"), headers=headers)
    assert first.status_code == 409 and _detail(first)["code"] == "thread_busy"
    with session_scope() as session:  # idle now: the same key still gets the first answer
        session.execute(sa.update(AgentRun).values(status="completed"))
    before = snapshot_of_store()
    again = api.post(COMPRESS.format("t1"), headers=headers)
    assert again.status_code == 409 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert snapshot_of_store() == before
    assert (_last_audit().outcome, _last_audit().detail["code"]) == ("replayed", "thread_busy")
    fresh = api.post(COMPRESS.format("t1"), headers={**headers, "Idempotency-Key": "busy-key-2"})
    assert fresh.status_code == 200 and fresh.json()["status"] == "completed"


def test_a_key_still_in_progress_is_409_and_runs_nothing(api: httpx.Client) -> None:
    seed_thread()
    token = _token(name="racer")
    with session_scope() as session:
        token_id = session.scalar(sa.select(ApiToken.id).where(ApiToken.actor == "racer"))
    assert token_id is not None
    print_ = idempotency.fingerprint("t1", None)
    assert idempotency.claim(get_settings(), token_id, "slow-key", print_) is None  # a first call
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers={**_bearer(token), **_ids("r2", "slow-key")})
    assert response.status_code == 409 and _detail(response)["code"] == "idempotency_in_progress"
    assert snapshot_of_store() == before
    audit = _last_audit()
    assert (audit.actor, audit.detail["code"], audit.detail["request_id"]) == (
        "api:racer",
        "idempotency_in_progress",
        "r2",
    )
    with session_scope() as session:  # the stored key is the caller's, never its token
        row = session.get(ApiIdempotencyKey, (token_id, "slow-key"))
        assert row is not None and row.status_code is None


def test_bad_caller_headers_are_400_audited_and_refused_credentials_keep_the_ids(
    api: httpx.Client,
) -> None:
    seed_thread()
    before = snapshot_of_store()
    for headers in (
        {"Idempotency-Key": "x" * 129},
        {"X-Request-Id": "has space"},
        {"Idempotency-Key": ""},
    ):
        response = api.post(COMPRESS.format("t1"), headers={**_bearer(_token()), **headers})
        assert response.status_code == 400 and _detail(response)["code"] == "invalid_input"
        assert _last_audit().detail["code"] == "invalid_input"
    assert snapshot_of_store() == before
    response = api.post(COMPRESS.format("t1"), headers=_ids("anon-1", "anon-key"))
    assert response.status_code == 401
    audit = _last_audit()
    assert audit.actor == "api:unauthenticated"
    assert (audit.detail["request_id"], audit.detail["idempotency_key"]) == ("anon-1", "anon-key")
