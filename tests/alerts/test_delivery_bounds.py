"""Delivery against a hostile receiver (tests/fixtures/hostile_http.py): one deadline, no lock held.

Alertmanager and the webhook both point at a real server on loopback that drips
its answer a byte at a time or sends 300 MB. A pass ends within the deadline
(plus a margin) with the failure recorded; a second pass at the same time skips
the channel the first has leased and the notice it has claimed instead of
waiting on a row lock; a notice that failed is sent on a later pass. PostgreSQL
only: the claims are `FOR UPDATE SKIP LOCKED` there.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from tests.alerts.builders import SECRET, add_rule, put_thread
from tests.fixtures.hostile_http import HostileServer
from yuxi_dash.alerts.delivery import ALERTMANAGER, WEBHOOK, Sent, deliver_all, drain_webhook
from yuxi_dash.alerts.evaluate import EvaluationReport, evaluate
from yuxi_dash.alerts.views import channels
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AlertChannel, AlertOutbox, utcnow

pytestmark = pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
DEADLINE = 2.0
MARGIN = 3.0  # the claim and record transactions, thread start-up, a loaded machine
DRIP = 0.5  # one byte every this many seconds: the answer would take minutes


def point_at(
    monkeypatch: pytest.MonkeyPatch,
    server: HostileServer,
    *,
    alertmanager: bool = True,
    webhook: bool = True,
) -> None:
    if alertmanager:
        monkeypatch.setenv("YUXI_DASH_ALERTMANAGER_URL", server.url)
    if webhook:
        monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_URL", f"{server.url}/hook")
        monkeypatch.setenv("YUXI_DASH_ALERT_WEBHOOK_SECRET", SECRET)
    monkeypatch.setenv("YUXI_DASH_ALERT_DEADLINE_SECONDS", str(DEADLINE))
    get_settings.cache_clear()


def one_firing_alert_queued() -> None:
    add_rule("hot")
    put_thread("t1", 0.95)
    report = evaluate(deliver=False)
    assert (report.fired, report.queued) == (1, 1)


def outbox() -> list[AlertOutbox]:
    with session_scope() as session:
        return list(session.scalars(sa.select(AlertOutbox).order_by(AlertOutbox.id)))


def leases() -> dict[str, object]:
    with session_scope() as session:
        return {c.channel: c.lease_until for c in session.scalars(sa.select(AlertChannel))}


def header(request: dict[str, Any], name: str) -> str | None:
    found = {k.lower(): v for k, v in request["headers"].items()}
    return found.get(name.lower())


def assert_one_failure_each(needle: str) -> None:
    by_name = {c.channel: c for c in channels()}
    for name in (ALERTMANAGER, WEBHOOK):
        info = by_name[name]
        assert (info.failures_total, info.sent_total, info.paused) == (1, 0, False), name
        assert info.last_error is not None and needle in info.last_error, info.last_error
    assert leases() == {ALERTMANAGER: None, WEBHOOK: None}  # nothing left leased
    (row,) = outbox()
    assert (row.sent_at, row.attempts, row.claimed_until) == (None, 1, None)
    assert row.next_attempt_at > utcnow()  # backing off, kept for a later pass


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body"])
def test_a_dripping_receiver_costs_one_deadline_and_the_failure_is_recorded(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    point_at(monkeypatch, hostile_server)
    hostile_server.behave(mode, drip_seconds=DRIP)
    one_firing_alert_queued()

    started = time.monotonic()
    sent = deliver_all(get_settings())
    took = time.monotonic() - started
    assert took < DEADLINE + MARGIN, took
    assert sent == Sent(webhook=0, alertmanager=0)
    paths = sorted(r["path"] for r in hostile_server.requests)
    assert paths == ["/api/v2/alerts", "/hook"]  # the deadline was spent: no retry
    assert_one_failure_each("deadline")


@pytest.mark.parametrize("mode", ["huge", "huge_declared"])
def test_a_huge_answer_is_a_failure_and_is_not_read(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    point_at(monkeypatch, hostile_server)
    hostile_server.behave(mode)  # 300 MB with a 200: accepted, but not an answer we read
    one_firing_alert_queued()

    started = time.monotonic()
    sent = deliver_all(get_settings())
    assert time.monotonic() - started < DEADLINE + MARGIN
    assert sent == Sent(webhook=0, alertmanager=0)
    assert_one_failure_each("too_large")


def test_a_second_pass_skips_what_the_first_holds_and_ends_within_its_deadline(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, hostile_server)
    hostile_server.behave("drip_headers", drip_seconds=DRIP)
    one_firing_alert_queued()
    results: dict[str, tuple[EvaluationReport, float]] = {}

    def run(name: str) -> None:
        started = time.monotonic()
        report = evaluate()  # what `yuxi-dash alerts evaluate` and serve's loop run
        results[name] = (report, time.monotonic() - started)

    first = threading.Thread(target=run, args=("first",))
    first.start()
    wait_until = time.monotonic() + DEADLINE
    while len(hostile_server.requests) < 2:  # both channels claimed, both posts in flight
        assert time.monotonic() < wait_until, "the first pass did not post"
        time.sleep(0.02)
    second = threading.Thread(target=run, args=("second",))
    second.start()
    second.join(60)
    first.join(60)

    report, took = results["second"]
    assert took < DEADLINE, took  # it skipped the leased channel and the claimed notice
    assert (report.alertmanager_posted, report.notified) == (0, 0)
    assert results["first"][1] < DEADLINE + MARGIN
    assert len(hostile_server.requests) == 2  # the second pass posted nothing
    assert_one_failure_each("deadline")  # only the first pass tried, once per channel


def test_a_failed_notice_is_kept_and_sent_with_the_same_event_id_later(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    point_at(monkeypatch, hostile_server, alertmanager=False)
    hostile_server.behave("drip_body", drip_seconds=DRIP)
    one_firing_alert_queued()
    now = utcnow()
    assert drain_webhook(get_settings(), now=now) == 0
    (row,) = outbox()
    assert (row.sent_at, row.attempts, row.claimed_until) == (None, 1, None)

    hostile_server.behave("plain", status=202, body=b"")
    assert drain_webhook(get_settings(), now=now) == 0  # backing off: not due yet
    assert len(hostile_server.requests) == 1
    assert drain_webhook(get_settings(), now=now + timedelta(seconds=3)) == 1
    (row,) = outbox()
    assert row.sent_at is not None and row.claimed_until is None and row.attempts == 2
    first, again = hostile_server.requests
    assert header(first, "X-Yuxi-Dash-Event") == header(again, "X-Yuxi-Dash-Event")
    assert first["body"] == again["body"]
    assert drain_webhook(get_settings(), now=now + timedelta(seconds=600)) == 0  # sent: done
    (hook,) = [c for c in channels() if c.channel == WEBHOOK]
    assert (hook.failures_total, hook.sent_total, hook.consecutive_failures) == (1, 1, 0)


def test_a_notice_never_overtakes_one_another_sender_is_posting(
    db_url: str, hostile_server: HostileServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two senders: while one posts notice 1, the other sends nothing, not notice 2 (a
    "resolved" must never reach the receiver before the "firing" it follows)."""
    from yuxi_dash.alerts.delivery import _claim_notice, _record_notice

    point_at(monkeypatch, hostile_server, alertmanager=False)
    hostile_server.behave("plain", status=202, body=b"")
    add_rule("hot")
    put_thread("t1", 0.95)
    put_thread("t2", 0.96)
    assert evaluate(deliver=False).queued == 2
    first_id = outbox()[0].id
    now = utcnow()
    claim = _claim_notice(get_settings(), now)  # sender A is posting notice 1
    assert claim is not None and claim.id == first_id
    assert drain_webhook(get_settings(), now=now) == 0  # sender B waits its turn
    assert hostile_server.requests == []
    _record_notice(get_settings(), claim, now, None)  # A's post was accepted
    assert drain_webhook(get_settings(), now=now) == 1  # now B sends notice 2
    (request,) = hostile_server.requests
    assert header(request, "X-Yuxi-Dash-Event") == outbox()[1].event_id
