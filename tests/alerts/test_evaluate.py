"""One evaluation pass (yuxi_dash.alerts.evaluate) on SQLite and real PostgreSQL."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
import sqlalchemy as sa

from tests.alerts.builders import ADMIN, add_rule, alert_audit, put_thread
from yuxi_dash.alerts import rules
from yuxi_dash.alerts.evaluate import ADVISORY_LOCK_KEY, evaluate
from yuxi_dash.alerts.views import current_alerts
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import CONTEXT_COMPRESSION, ORIGIN_ATTACHED, Agent, utcnow


def states() -> dict[tuple[str, str], str]:
    return {(a.rule, a.thread_id): a.state for a in current_alerts()}


def test_fires_holds_by_hysteresis_and_resolves_below_clear_at(db_url: str) -> None:
    add_rule("hot")  # 0.85 / 0.80
    add_rule("tight", fire_at=0.85, clear_at=0.83)
    put_thread("t1", 0.90)
    put_thread("t2", 0.50)
    report = evaluate()
    assert (report.fired, report.firing) == (2, 2)
    assert states() == {("hot", "t1"): "firing", ("tight", "t1"): "firing"}

    put_thread("t1", 0.82)  # below fire_at, above hot's clear_at, below tight's
    report = evaluate()
    assert states() == {("hot", "t1"): "firing"}
    assert report.resolved == 1

    again = evaluate()  # nothing changed: no transition, no audit row
    assert (again.fired, again.resolved, again.firing) == (0, 0, 1)
    assert alert_audit() == [
        ("thread:t1", "firing"),
        ("thread:t1", "firing"),
        ("thread:t1", "resolved"),
    ]

    put_thread("t1", 0.79)
    assert evaluate().resolved == 1
    assert states() == {}


def test_for_seconds_pending_first_and_a_drop_while_pending_never_fires(db_url: str) -> None:
    add_rule("slow", for_seconds=120)
    put_thread("t1", 0.95)
    put_thread("t2", 0.95)
    now = utcnow()
    assert evaluate(now=now).started_pending == 2
    assert set(states().values()) == {"pending"}

    put_thread("t2", 0.84)  # below fire_at while pending
    report = evaluate(now=now + timedelta(seconds=60))
    assert report.cancelled == 1
    assert states() == {("slow", "t1"): "pending"}

    report = evaluate(now=now + timedelta(seconds=121))
    assert report.fired == 1
    assert states() == {("slow", "t1"): "firing"}
    assert ("thread:t2", "firing") not in alert_audit()
    assert alert_audit().count(("thread:t2", "cancelled")) == 1


def test_a_pass_for_one_thread_leaves_the_others_alone(db_url: str) -> None:
    add_rule("hot")
    put_thread("t1", 0.95)
    put_thread("t2", 0.95)
    assert evaluate(thread_id="t1").fired == 1  # what a hook runs after t1's write
    assert states() == {("hot", "t1"): "firing"}
    put_thread("t1", 0.10)
    report = evaluate(thread_id="t2")
    assert (report.fired, report.resolved) == (1, 0)  # t1 moved, but it was not asked
    assert states() == {("hot", "t1"): "firing", ("hot", "t2"): "firing"}
    assert evaluate().resolved == 1  # the full pass catches up
    assert states() == {("hot", "t2"): "firing"}


def test_two_deleted_rules_on_one_thread_both_resolve(db_url: str) -> None:
    add_rule("a")
    add_rule("b", fire_at=0.9, clear_at=0.5)
    put_thread("t1", 0.95)
    assert evaluate().firing == 2
    rules.delete_rule(ADMIN, "a")
    rules.delete_rule(ADMIN, "b")
    report = evaluate()
    assert (report.resolved, report.firing) == (2, 0)


def test_scope_deleted_threads_and_deleted_rules(db_url: str) -> None:
    add_rule("own-only", scope="own")
    add_rule("agent-b", agent="agent-b")
    put_thread("mine", 0.9)
    put_thread("theirs", 0.9, origin=ORIGIN_ATTACHED, agent="agent-b")
    evaluate()
    assert states() == {
        ("own-only", "mine"): "firing",
        ("agent-b", "theirs"): "firing",
    }
    put_thread("theirs", 0.9, origin=ORIGIN_ATTACHED, agent="agent-b", status="deleted")
    rules.delete_rule(ADMIN, "own-only")
    report = evaluate()
    assert report.resolved == 2
    assert states() == {}


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_many_threads_one_pass(db_url: str) -> None:
    add_rule("hot")
    for i in range(60):
        put_thread(f"t{i}", 0.9 if i % 3 == 0 else 0.2)
    assert evaluate().firing == 20
    assert evaluate().fired == 0


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_one_evaluator_at_a_time_on_postgresql(db_url: str) -> None:
    add_rule("hot")
    put_thread("t1", 0.9)
    engine = sa.create_engine(db_url)
    results: list[int] = []
    try:
        with engine.connect() as other:  # another replica, holding the evaluator's lock
            other.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
            waiting = threading.Thread(target=lambda: results.append(evaluate().fired))
            waiting.start()
            waiting.join(1.5)
            assert waiting.is_alive() and results == []  # it waits for the lock
            other.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": ADVISORY_LOCK_KEY})
            other.commit()
            waiting.join(30)
        assert results == [1]
    finally:
        engine.dispose()


def _agent(slug: str, *, compress: bool) -> None:
    with session_scope() as session:
        agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
        if agent is None:
            agent = Agent(slug=slug, name=slug)
            session.add(agent)
        agent.capabilities = [CONTEXT_COMPRESSION] if compress else ["knowledge_base"]


def test_a_compressible_only_rule_leaves_out_threads_nobody_can_compress(db_url: str) -> None:
    _agent("can", compress=True)
    _agent("cannot", compress=False)
    rules.add_rule(ADMIN, name="act")  # compressible_only: the default of a new rule
    add_rule("every")  # every thread
    put_thread("ok", 0.9, agent="can")
    put_thread("no", 0.9, agent="cannot")
    put_thread("ghost", 0.9, agent="not-registered")
    put_thread("theirs", 0.9, agent="can", origin=ORIGIN_ATTACHED)  # no platform endpoint
    evaluate()
    assert {t for (rule, t) in states() if rule == "act"} == {"ok"}
    assert {t for (rule, t) in states() if rule == "every"} == {"ok", "no", "ghost", "theirs"}
    alert = next(a for a in current_alerts() if a.thread_id == "no")
    assert alert.compress_blocker == "agent cannot does not support context compression"

    _agent("can", compress=False)  # the agent lost the capability: its alert resolves
    assert evaluate().resolved == 1
    assert {t for (rule, t) in states() if rule == "act"} == set()
