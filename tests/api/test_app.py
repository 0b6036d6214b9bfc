"""The HTTP API through a real uvicorn server, on SQLite and on the real PostgreSQL.

The server runs in a thread on a free loopback port (`running_api`); requests go
over TCP with httpx. Every status of the compress contract, the token rules, the
probes and the audit rows each call leaves.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.live_server import free_port
from tests.fixtures.profiles import examples
from tests.service.builders import audit_rows, history_files, seed_thread, snapshot_of_store
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.api.app import MAX_BODY_BYTES, create_app
from yuxi_dash.api.server import server_config
from yuxi_dash.api.service_tokens import create_token, hash_token, revoke_token
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import get_engine, session_scope
from yuxi_dash.store.models import AgentRun, ApiToken

ADMIN = Actor(id="admin@example.com", role=Role.ADMIN, via="cli")
COMPRESS = "/api/chat/thread/{}/compress"
RESULT_FIELDS = {
    "thread_id",
    "status",
    "before_tokens",
    "after_tokens",
    "compressed_messages",
    "file_path",
    "reason",
    "checkpoint_id",
}


@contextmanager
def running_api(settings: Settings | None = None) -> Iterator[httpx.Client]:
    """A real uvicorn server with our app on a free loopback port, and a client for it.

    Set up as `api serve` sets it up (`api.server.server_config`: its protocol and limits).
    """
    resolved = settings or get_settings()
    config = server_config(
        create_app(resolved), host="127.0.0.1", port=free_port(), settings=resolved
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="api-under-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the API did not start"
        time.sleep(0.02)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{config.port}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive()


@pytest.fixture
def api(db_url: str) -> Iterator[httpx.Client]:
    with running_api() as client:
        yield client


def _token(role: str = "operator", name: str = "bot") -> str:
    return create_token(role=role, actor_name=name, by=ADMIN, settings=get_settings()).token


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _detail(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"detail"}, body
    detail: dict[str, Any] = body["detail"]
    assert isinstance(detail.get("code"), str) and isinstance(detail.get("message"), str)
    return detail


def _last_audit(thread_id: str = "t1") -> Any:
    wait_for_pending_audit()
    rows = audit_rows(thread_id)
    assert rows, "no audit row"
    return rows[0]  # newest first


# --- the happy path ------------------------------------------------------------------


def test_compress_through_the_api_completes_and_is_audited_as_the_token(
    api: httpx.Client,
) -> None:
    seeded = seed_thread()
    response = api.post(
        COMPRESS.format("t1"),
        headers=_bearer(_token(name="nightly-job")),
        json={"expected_checkpoint_id": seeded},
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert set(result) == RESULT_FIELDS  # the fields `yuxi-dash compress --json` prints
    assert result["status"] == "completed" and result["thread_id"] == "t1"
    assert result["checkpoint_id"] not in (None, seeded)
    assert result["after_tokens"] < result["before_tokens"]
    audit = _last_audit()
    assert (audit.actor, audit.action, audit.outcome) == (
        "api:nightly-job",
        "compress",
        "completed",
    )
    assert audit.detail["via"] == "api" and audit.detail["role"] == "operator"
    assert audit.detail["checkpoint_id"] == result["checkpoint_id"]
    # no body at all is fine too: a no_op now (nothing left to summarize) is still 200
    again = api.post(COMPRESS.format("t1"), headers=_bearer(_token()))
    assert again.status_code == 200 and again.json()["status"] in {"completed", "no_op"}


# --- credentials ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Basic dXNlcjpwdw=="},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer yxd_not-a-token-we-know"},
        {"Authorization": "Bearer " + "x" * 5000},
    ],
    ids=["none", "basic", "empty-bearer", "unknown", "huge"],
)
def test_no_usable_token_is_401_audited_and_changes_nothing(
    api: httpx.Client, headers: dict[str, str]
) -> None:
    seed_thread()
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert _detail(response)["code"] == "unauthorized"
    assert snapshot_of_store() == before and history_files() == []
    audit = _last_audit()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (
        "api:unauthenticated",
        "refused",
        "unauthorized",
    )


def test_a_revoked_token_is_401(api: httpx.Client) -> None:
    seed_thread()
    created = create_token(role="admin", actor_name="old", by=ADMIN, settings=get_settings())
    revoke_token(created.id, by=ADMIN, settings=get_settings())
    response = api.post(COMPRESS.format("t1"), headers=_bearer(created.token))
    assert response.status_code == 401 and _detail(response)["code"] == "unauthorized"
    assert "revoked" in _detail(response)["message"]
    assert _last_audit().actor == "api:unauthenticated"


def test_a_viewer_token_is_403_and_audited_as_its_actor(api: httpx.Client) -> None:
    seed_thread()
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers=_bearer(_token("viewer", "dash-reader")))
    assert response.status_code == 403 and _detail(response)["code"] == "forbidden"
    assert snapshot_of_store() == before
    audit = _last_audit()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (
        "api:dash-reader",
        "refused",
        "forbidden",
    )


def test_no_plaintext_token_anywhere_in_the_database(api: httpx.Client) -> None:
    seed_thread()
    tokens = [_token("operator", "a"), _token("viewer", "b")]
    for token in tokens:  # used too, so every audit row the calls write is in the dump
        api.post(COMPRESS.format("t1"), headers=_bearer(token))
    api.post(COMPRESS.format("t1"), headers=_bearer(tokens[0] + "x"))  # a near miss
    wait_for_pending_audit()
    dump = _database_dump()
    for token in tokens:
        assert token not in dump and token[4:] not in dump
        assert hash_token(token) in dump  # what is stored instead
    with session_scope() as session:
        hashes = session.scalars(sa.select(ApiToken.hash)).all()
    assert sorted(hashes) == sorted(hash_token(t) for t in tokens)


def _database_dump() -> str:
    """Every row of every table of our database, as text."""
    engine = get_engine()
    names = sa.inspect(engine).get_table_names()
    assert "api_tokens" in names
    parts: list[str] = []
    with engine.connect() as conn:
        for name in names:
            table = sa.Table(name, sa.MetaData(), autoload_with=conn)
            parts.extend(repr(tuple(row)) for row in conn.execute(sa.select(table)))
    return "\n".join(parts)


# --- the thread's own refusals ------------------------------------------------------


def test_missing_and_deleted_threads_are_404(api: httpx.Client) -> None:
    seed_thread("gone", status="deleted")
    headers = _bearer(_token())
    missing = api.post(COMPRESS.format("nope"), headers=headers)
    assert missing.status_code == 404 and _detail(missing)["code"] == "thread_not_found"
    deleted = api.post(COMPRESS.format("gone"), headers=headers)
    assert deleted.status_code == 404 and _detail(deleted)["code"] == "thread_deleted"
    assert _last_audit("nope").detail["code"] == "thread_not_found"
    assert _last_audit("gone").outcome == "refused"


def test_a_busy_thread_is_409_thread_busy(api: httpx.Client) -> None:
    seed_thread()
    with session_scope() as session:
        session.add(AgentRun(thread_id="t1", run_type="chat", status="running"))
    before = snapshot_of_store()
    response = api.post(COMPRESS.format("t1"), headers=_bearer(_token()))
    assert response.status_code == 409 and _detail(response)["code"] == "thread_busy"
    assert snapshot_of_store() == before
    assert _last_audit().detail["code"] == "thread_busy"


def test_a_stale_checkpoint_is_409_stale_state(api: httpx.Client) -> None:
    seed_thread()
    before = snapshot_of_store()
    response = api.post(
        COMPRESS.format("t1"),
        headers=_bearer(_token()),
        json={"expected_checkpoint_id": "1f000000-0000-6000-8000-000000000000"},
    )
    assert response.status_code == 409 and _detail(response)["code"] == "stale_state"
    assert snapshot_of_store() == before
    audit = _last_audit()
    assert audit.detail["code"] == "stale_state" and audit.actor == "api:bot"


def test_an_agent_without_compression_is_422(api: httpx.Client) -> None:
    seed_thread(capabilities=[])
    response = api.post(COMPRESS.format("t1"), headers=_bearer(_token()))
    assert response.status_code == 422 and _detail(response)["code"] == "compression_unsupported"
    assert _last_audit().detail["code"] == "compression_unsupported"


def test_a_missing_workdir_is_503(api: httpx.Client) -> None:
    seed_thread()
    shutil.rmtree(get_settings().workdir)  # a shared volume that did not mount
    response = api.post(COMPRESS.format("t1"), headers=_bearer(_token()))
    assert response.status_code == 503 and _detail(response)["code"] == "workdir_unavailable"
    assert _last_audit().detail["code"] == "workdir_unavailable"
    ready = api.get("/readyz", headers=_bearer(_token("viewer", "probe")))
    assert ready.status_code == 503
    assert _detail(ready)["checks"] == {"database": "ok", "workdir": "unavailable"}
    anonymous = api.get("/readyz")
    assert (anonymous.status_code, anonymous.json()) == (503, {"ready": False})


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b"{not json", 400),
        (b"[1, 2]", 400),
        (b'{"expected_checkpoint_id": 7}', 400),
        (b'{"expected_checkpoint_id": ""}', 400),
        (b'{"expected_checkpoint_id": "' + b"c" * (MAX_BODY_BYTES + 10) + b'"}', 400),
        (b"\xff\xfe", 400),
    ],
    ids=["not-json", "array", "number", "empty-id", "too-large", "not-utf8"],
)
def test_bad_input_is_one_typed_error_audited_and_changes_nothing(
    api: httpx.Client, content: bytes, status: int
) -> None:
    seed_thread()
    before = snapshot_of_store()
    response = api.post(
        COMPRESS.format("t1"),
        headers={**_bearer(_token()), "Content-Type": "application/json"},
        content=content,
    )
    assert response.status_code == status and _detail(response)["code"] == "invalid_input"
    assert snapshot_of_store() == before
    audit = _last_audit()
    assert (audit.actor, audit.outcome, audit.detail["code"]) == (
        "api:bot",
        "refused",
        "invalid_input",
    )


def test_a_bad_thread_id_and_unknown_routes_keep_the_error_shape(api: httpx.Client) -> None:
    too_long = "t" * 300
    response = api.post(COMPRESS.format(too_long), headers=_bearer(_token()))
    assert response.status_code == 400 and _detail(response)["code"] == "invalid_input"
    assert api.get("/nowhere").status_code == 404
    assert _detail(api.get("/nowhere"))["code"] == "not_found"
    wrong_method = api.get(COMPRESS.format("t1"))
    assert wrong_method.status_code == 405
    assert _detail(wrong_method)["code"] == "method_not_allowed"


_BODIES = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner),
        max_leaves=8,
    ).map(lambda value: json.dumps(value).encode()),
    st.text(max_size=300).map(
        lambda value: json.dumps({"expected_checkpoint_id": value}).encode("utf-8", "surrogatepass")
    ),
)


@pytest.fixture
def fuzz_api(api: httpx.Client) -> tuple[httpx.Client, str]:
    """The API, an operator token and thread `fz`, which has nothing to summarize (no_op)."""
    seed_thread("fz", messages=[])
    return api, _token(name="fuzz")


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=_BODIES)
def test_any_body_is_an_answer_of_the_contract_never_a_500(
    fuzz_api: tuple[httpx.Client, str], body: bytes
) -> None:
    client, token = fuzz_api
    response = client.post(COMPRESS.format("fz"), headers=_bearer(token), content=body)
    assert response.status_code in {200, 400, 409}, response.text
    if response.status_code == 200:
        assert response.json()["status"] == "no_op"
    else:
        assert _detail(response)["code"] in {"invalid_input", "stale_state"}


# --- probes --------------------------------------------------------------------------


def test_healthz_and_readyz(api: httpx.Client) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    ready = api.get("/readyz", headers=_bearer(_token("viewer", "probe")))
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"database": "ok", "workdir": "ok"}}


def test_a_database_that_is_down_is_503_not_ready_and_503_on_compress(tmp_path: Any) -> None:
    down = Settings(
        database_url="postgresql+psycopg://nobody@127.0.0.1:1/none", workdir=tmp_path / "workdir"
    )
    with running_api(down) as client:
        assert client.get("/healthz").status_code == 200  # alive, just not ready
        ready = client.get("/readyz", headers=_bearer("yxd_anything"))
        # the token cannot be checked without the database: the answer without details
        assert (ready.status_code, ready.json()) == (503, {"ready": False})
        response = client.post(COMPRESS.format("t1"), headers=_bearer("yxd_anything"))
        assert response.status_code == 503 and _detail(response)["code"] == "store_unavailable"
