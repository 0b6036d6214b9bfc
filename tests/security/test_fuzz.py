"""Fuzzing ids, texts and integers on the service and the CLI (SQLite and PostgreSQL).

The only outcomes allowed are success, or one `YuxiDashError` with a stable
code (on the CLI: exit 0 or a documented exit code with that code in the JSON
error) — never a raw driver error, never `internal_error` — and every refusal
leaves exactly one new audit row and no other change. Examples are few (60 per
test) so the suite stays fast; the hostile values that matter (NUL, lone
surrogates, control characters, empty, over-long, beyond 64 bits) are always
in the mix, beside random text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.profiles import examples
from tests.security.test_bad_input import audits, row_counts
from tests.service.builders import OPERATOR, import_payload, seed_thread
from yuxi_dash import service, sources
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.cli import main
from yuxi_dash.errors import MemoryGatedOff, YuxiDashError
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, ChatMessage, Conversation
from yuxi_dash.tool_results.index import read_tool_result

VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
FUZZ = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _codes(cls: type[YuxiDashError]) -> set[str]:
    return {cls.code}.union(*(_codes(sub) for sub in cls.__subclasses__()))


KNOWN_CODES = _codes(YuxiDashError) - {"internal_error"}
EXIT_CODES = {0, 1, 2, 3, 4, 5, 6}  # 1 only with a typed code (workdir_unavailable, ...)

_chars = st.one_of(st.characters(), st.characters(categories=["Cs", "Cc"]))
HOSTILE = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "t\x001",
        "t1\x00",
        "\ud800",
        "t1\udfff",
        "\n",
        "t1\n",
        "a" * 129,
        "-x",
        "' OR 1=1 --",
        "%00",
        "t1",
        "missing",
        "alice_chen",
    ]
)
IDS = st.one_of(HOSTILE, st.text(_chars, max_size=140))
TEXTS = st.one_of(HOSTILE, st.text(_chars, max_size=300))
BIG = st.one_of(
    st.sampled_from([2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 10**30, 0, -1]),
    st.integers(min_value=-(2**80), max_value=2**80),
)


def _audit_count() -> int:
    with session_scope() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(AuditEntry)) or 0)


def attempt(call: Callable[[], Any], action: str) -> Any:
    """Run `call`: success, or a typed refusal with one new `action` audit row and no change."""
    before_rows = row_counts()
    before_audit = len(audits(action))
    try:
        return call()
    except YuxiDashError as exc:
        assert exc.code in KNOWN_CODES, exc.code
        assert "\n" not in exc.message
        after = audits(action)
        assert len(after) == before_audit + 1, (action, exc.code)
        assert after[-1].detail.get("code") == exc.code
        assert row_counts() == before_rows
        return exc


@pytest.fixture
def one_thread(db_url: str) -> str:
    seed_thread()
    return db_url


# --- the service -------------------------------------------------------------------------


@FUZZ
@given(thread_id=IDS)
def test_fuzz_thread_ids_on_the_service(one_thread: str, thread_id: str) -> None:
    attempt(lambda: sources.compress_thread_context(thread_id, actor=OPERATOR), "compress")
    attempt(lambda: service.dispatch_next_request(thread_id), "dispatch_request")
    attempt(lambda: service.start_run(thread_id, run_type="resume"), "start_run")
    attempt(lambda: service.enqueue_request(thread_id, content="hello"), "intake")


@FUZZ
@given(content=TEXTS, note=TEXTS)
def test_fuzz_intake_content_is_stored_literally_or_refused(
    one_thread: str, content: str, note: str
) -> None:
    outcome = attempt(
        lambda: service.enqueue_request("t1", content=content, payload={"note": note}), "intake"
    )
    if isinstance(outcome, YuxiDashError):
        assert outcome.code == "invalid_input"
        assert any(c == "\x00" or "\ud800" <= c <= "\udfff" for c in content + note)
        return
    with session_scope() as session:
        stored = session.scalar(
            sa.select(ChatMessage.content).order_by(ChatMessage.id.desc()).limit(1)
        )
    assert stored == content  # exactly what arrived, nothing rewritten


@FUZZ
@given(result_id=BIG, offset=BIG, limit=BIG, run_id=BIG, request_id=BIG)
def test_fuzz_integers_on_the_service(
    one_thread: str, result_id: int, offset: int, limit: int, run_id: int, request_id: int
) -> None:
    attempt(
        lambda: read_tool_result(result_id, actor=VIEWER, offset=offset, limit=limit),
        "read_tool_result",
    )
    attempt(lambda: service.finish_run(run_id), "finish_run")
    attempt(lambda: service.cancel_request(request_id), "cancel_request")


@FUZZ
@given(
    thread_id=IDS,
    title=TEXTS,
    context_window=BIG,
    threshold=BIG,
    depth=st.integers(min_value=0, max_value=200),
)
def test_fuzz_imports(
    db_url: str, thread_id: str, title: str, context_window: int, threshold: int, depth: int
) -> None:
    payload = import_payload()
    payload.update(thread_id=thread_id, title=title)
    payload["agent"].update(context_window=context_window, summary_threshold=threshold)
    nested: Any = "leaf"
    for _ in range(depth):
        nested = [nested]
    payload["messages"][0]["data"]["additional_kwargs"] = {"nested": nested}
    outcome = attempt(lambda: service.import_thread(payload, actor=OPERATOR), "import_thread")
    if not isinstance(outcome, YuxiDashError):
        with session_scope() as session:
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            )
            assert conv is not None and conv.context_window == context_window


# --- the CLI, in process -----------------------------------------------------------------


def cli(capsys: pytest.CaptureFixture[str], argv: list[str], *, flags: bool = False) -> None:
    """One command: exit 0, or a documented exit code with a typed code, one audit row, no change.

    `flags`: the command is `flags USER`, which answers a valid user gated off with exit 6
    and the flags themselves (the documented behaviour), not an error.
    """
    before_rows = row_counts()
    before_audit = _audit_count()
    code = main(argv)
    out, _ = capsys.readouterr()
    assert code in EXIT_CODES, (argv, code)
    if code == 0:
        return
    body = json.loads(out)
    if flags and code == MemoryGatedOff.exit_code:
        keys = (get_settings().memory_flag_key, get_settings().communities_flag_key)
        assert set(body) == set(keys), (argv, body)
        assert body[keys[0]]["value"] is False, (argv, body)  # gated off, as the exit says
        # flag values are not memory: reading them is no refusal and writes no audit row
        assert wait_for_pending_audit(30) and _audit_count() == before_audit, argv
        assert row_counts() == before_rows, argv
        return
    error = body["error"]
    assert error["code"] in KNOWN_CODES, (argv, error)
    assert wait_for_pending_audit(30) and _audit_count() == before_audit + 1, (argv, error)
    assert row_counts() == before_rows, argv


@FUZZ
@given(thread_id=IDS)
def test_fuzz_thread_ids_on_the_cli(
    one_thread: str, capsys: pytest.CaptureFixture[str], thread_id: str
) -> None:
    cli(capsys, ["compress", "--actor", "ops", "--json", "--", thread_id])
    cli(capsys, ["context", "--json", "--", thread_id])
    cli(capsys, ["tool-results", f"--thread={thread_id}", "--json"])
    cli(capsys, ["tool-results", f"--thread={thread_id}", "--verify", "--json"])


@FUZZ
@given(user_id=IDS, search=TEXTS)
def test_fuzz_user_ids_on_the_cli(
    db_url: str, capsys: pytest.CaptureFixture[str], user_id: str, search: str
) -> None:
    # no LaunchDarkly source: a valid id is gated off (exit 6; audited but for `flags`) before any graph query
    cli(capsys, ["memory", "stats", "--actor", "ops", "--json", "--", user_id])
    cli(capsys, ["memory", "entities", f"--search={search}", "--json", "--", user_id])
    cli(capsys, ["flags", "--json", "--", user_id], flags=True)
    cli(capsys, ["threads", f"--user={user_id}", "--json"])
