"""Corrections through graphiti-core's own classes, audited with before and after; undo; refusals."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from falkordb.asyncio import FalkorDB as AsyncFalkorDB
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.edges import EntityEdge
from ldclient.integrations.test_data import TestData

from tests.fixtures.desk import DESK_OTHER, DESK_USER, DeskGraph
from tests.fixtures.graph import memory_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden, MemoryGatedOff, YuxiDashError
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import hits_connection
from yuxi_dash.memory.graph.correction_rules import snapshot
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.views.ratification import hits_key
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, MemoryCorrection

OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
OTHER_OPERATOR = Actor(id="other-ops@example.com", role=Role.OPERATOR)
ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)
REASON = "the user says this never happened (ticket call)"


@pytest.fixture
def flags(memory_settings) -> Iterator[tuple[TestData, FlagEvaluator]]:
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    ev = FlagEvaluator.from_test_data(memory_settings, data)
    yield data, ev
    ev.close()


def read_edge(server: ServerHandle, user_id: str, uuid: str) -> EntityEdge | None:
    """The edge as graphiti-core's own EntityEdge.get_by_uuid reads it (embedding loaded)."""

    async def go() -> EntityEdge | None:
        db = AsyncFalkorDB(**server.redis_kwargs())  # type: ignore[arg-type]
        driver = FalkorDriver(falkor_db=db, database=f"user_{user_id}")
        try:
            edge = await EntityEdge.get_by_uuid(driver, uuid)
            await edge.load_fact_embedding(driver)
            return edge
        except Exception:  # noqa: BLE001 - EdgeNotFoundError: gone
            return None
        finally:
            await db.aclose()

    return asyncio.run(go())


def state(server: ServerHandle, uuid: str, user_id: str = DESK_USER) -> dict[str, Any] | None:
    edge = read_edge(server, user_id, uuid)
    if edge is None:
        return None
    snap = snapshot(edge)
    for key in ("source_uuid", "target_uuid"):  # graphiti-core's save adds its own copies
        snap["attributes"].pop(key, None)
    return snap


def run(action: str, fact: str, ev: FlagEvaluator, settings, **kw: Any) -> dict[str, Any]:
    kw.setdefault("actor", OPERATOR)
    kw.setdefault("reason", REASON)
    return corrections.correct(action, DESK_USER, fact, settings=settings, evaluator=ev, **kw)


def hits(settings, fact: str) -> Any:
    conn = hits_connection(settings)
    try:
        return conn.get(hits_key(DESK_USER, fact))
    finally:
        conn.close()


def correction_row(settings, audit_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    with session_scope(settings) as session:
        row = session.query(MemoryCorrection).filter_by(audit_id=audit_id).one()
        audit = session.get(AuditEntry, audit_id)
        return (
            {
                "action": row.action,
                "reason": row.reason,
                "ticket": row.ticket,
                "before": row.before,
                "after": row.after,
                "fact_uuid": row.fact_uuid,
            },
            {"action": audit.action, "outcome": audit.outcome, "detail": audit.detail},
        )


def test_retract_invalidates_keeps_the_fact_audits_and_clears_hits(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["dark"]
    before = state(falkordb_server, fact)
    assert hits(memory_settings, fact) == b"2"
    result = run("retract", fact, flags[1], memory_settings, ticket="SUP-1234")
    edge = read_edge(falkordb_server, DESK_USER, fact)
    assert edge is not None and edge.fact == "Desk User prefers dark mode"
    assert edge.invalid_at is not None and edge.expired_at == edge.invalid_at
    assert edge.attributes["status"] == "retracted"
    assert edge.fact_embedding == pytest.approx(before["fact_embedding"], abs=1e-6)
    assert hits(memory_settings, fact) is None and result["hits_cleared"] is True
    row, audit = correction_row(memory_settings, result["audit_id"])
    assert row["before"][fact] == before
    assert row["after"][fact] == state(falkordb_server, fact)
    assert row["reason"] == REASON and row["ticket"] == "SUP-1234"
    assert audit["action"] == "memory.retract" and audit["outcome"] == "ok"
    assert audit["detail"]["fact_uuid"] == fact
    assert audit["detail"]["group_id"] == "user_desk_user"
    assert audit["detail"]["correction_id"] == result["correction_id"]
    assert "reason" not in audit["detail"]


def test_undo_restores_the_exact_edge_once(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["dark"]
    before = state(falkordb_server, fact)
    result = run("retract", fact, flags[1], memory_settings)
    undone = corrections.undo_correction(
        result["audit_id"], actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
    )
    assert state(falkordb_server, fact) == before
    assert hits(memory_settings, fact) == b"2"
    with pytest.raises(YuxiDashError) as twice:
        corrections.undo_correction(
            result["audit_id"], actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
        )
    assert twice.value.code == "already_undone"
    with pytest.raises(YuxiDashError) as of_undo:
        corrections.undo_correction(
            undone["audit_id"], actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
        )
    assert of_undo.value.code == "not_undoable"
    assert state(falkordb_server, fact) == before
    actions = [(r.action, r.outcome) for r in memory_audit(memory_settings, DESK_USER)]
    assert actions.count(("memory.undo", "ok")) == 1
    assert actions.count(("memory.undo", "refused")) == 2


def test_undo_of_another_operators_correction_needs_an_admin_and_a_reason(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["dark"]
    before = state(falkordb_server, fact)
    result = run("retract", fact, flags[1], memory_settings)
    retracted = state(falkordb_server, fact)
    undo = {"settings": memory_settings, "evaluator": flags[1]}
    for actor, reason, code in (
        (OTHER_OPERATOR, REASON, "not_your_correction"),  # another operator, even with a reason
        (ADMIN, "", "reason_required"),  # an admin, without a reason
        (ADMIN, "oops", "reason_required"),
    ):
        with pytest.raises(YuxiDashError) as refused:
            corrections.undo_correction(result["audit_id"], actor=actor, reason=reason, **undo)
        assert refused.value.code == code
        assert state(falkordb_server, fact) == retracted  # nothing changed
    # the refusals, audited with whose correction it was
    rows = [r for r in memory_audit(memory_settings, DESK_USER) if r.action == "memory.undo"]
    assert sorted((r.actor, r.outcome, r.detail["code"]) for r in rows) == [
        (ADMIN.id, "refused", "reason_required"),
        (ADMIN.id, "refused", "reason_required"),
        (OTHER_OPERATOR.id, "refused", "not_your_correction"),
    ]
    assert {(r.detail["undoes_actor"], r.detail["own"]) for r in rows} == {(OPERATOR.id, False)}
    done = corrections.undo_correction(result["audit_id"], actor=ADMIN, reason=REASON, **undo)
    assert state(falkordb_server, fact) == before and done["actor"] == ADMIN.id
    row, audit = correction_row(memory_settings, done["audit_id"])
    assert row["action"] == "undo" and row["reason"] == REASON
    assert (audit["outcome"], audit["detail"]["undoes_actor"], audit["detail"]["own"]) == (
        "ok",
        OPERATOR.id,
        False,
    )
    assert "reason" not in audit["detail"]


def test_the_author_undoes_without_a_reason(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["dark"]
    result = run("retract", fact, flags[1], memory_settings, actor=OTHER_OPERATOR)
    assert result["actor"] == OTHER_OPERATOR.id
    done = corrections.undo_correction(
        result["audit_id"], actor=OTHER_OPERATOR, settings=memory_settings, evaluator=flags[1]
    )
    _row, audit = correction_row(memory_settings, done["audit_id"])
    assert (audit["detail"]["own"], audit["detail"]["undoes_actor"]) == (True, OTHER_OPERATOR.id)


def test_undo_refuses_when_the_fact_changed_since(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["dark"]
    first = run("retract", fact, flags[1], memory_settings)
    run("restore", fact, flags[1], memory_settings)
    changed = state(falkordb_server, fact)
    with pytest.raises(YuxiDashError) as stale:
        corrections.undo_correction(
            first["audit_id"], actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
        )
    assert stale.value.code == "stale_fact"
    assert state(falkordb_server, fact) == changed


def test_supersede_links_both_and_undo_removes_the_new_fact(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["caching"]
    before = state(falkordb_server, fact)
    result = run("supersede", fact, flags[1], memory_settings, text="Desk User dislikes caching")
    new_uuid = result["new_fact_uuid"]
    old = read_edge(falkordb_server, DESK_USER, fact)
    new = read_edge(falkordb_server, DESK_USER, new_uuid)
    assert old is not None and new is not None
    assert old.invalid_at is not None and old.expired_at is not None
    assert old.attributes["status"] == "superseded" and old.attributes["superseded_by"] == new_uuid
    assert new.fact == "Desk User dislikes caching" and new.attributes["supersedes"] == fact
    assert new.invalid_at is None and new.expired_at is None
    assert (new.source_node_uuid, new.target_node_uuid, new.name) == (
        old.source_node_uuid,
        old.target_node_uuid,
        old.name,
    )
    row, _ = correction_row(memory_settings, result["audit_id"])
    assert row["before"] == {fact: before, new_uuid: None}
    assert row["after"][new_uuid]["fact"] == "Desk User dislikes caching"
    corrections.undo_correction(
        result["audit_id"], actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
    )
    assert state(falkordb_server, fact) == before
    assert read_edge(falkordb_server, DESK_USER, new_uuid) is None


def test_restore_a_wrongly_invalidated_fact(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["contractor"]
    run("restore", fact, flags[1], memory_settings)
    edge = read_edge(falkordb_server, DESK_USER, fact)
    assert edge is not None
    assert (edge.invalid_at, edge.expired_at, edge.attributes["status"]) == (None, None, "active")


def test_reject_a_tentative_fact_only(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["tentative"]
    result = run("reject", fact, flags[1], memory_settings)
    edge = read_edge(falkordb_server, DESK_USER, fact)
    assert edge is not None and edge.attributes["status"] == "rejected"
    assert edge.expired_at is not None
    assert hits(memory_settings, fact) is None and result["hits_before"] == 3
    with pytest.raises(YuxiDashError) as not_tentative:
        run("reject", desk_graph.facts["full_time"], flags[1], memory_settings)
    assert not_tentative.value.code == "not_tentative"


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("viewer", "forbidden"),
        ("gated_off", "memory_gated_off"),
        ("hostile_uuid", "invalid_fact_uuid"),
        ("other_users_fact", "fact_not_found"),
        ("short_reason", "reason_required"),
        ("two_word_reason", "reason_required"),
        ("bad_ticket", "invalid_ticket"),
    ],
)
def test_refusals_change_nothing_and_are_audited(
    case: str, code: str, desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    data, ev = flags
    fact = desk_graph.facts["dark"]
    kw: dict[str, Any] = {}
    if case == "viewer":
        kw["actor"] = VIEWER
    if case == "gated_off":
        data.update(data.flag("graphiti-memory").variation_for_all(False))
    if case == "hostile_uuid":
        fact = "00000000-0000-4000-8000-000000000201'}) DETACH DELETE e //"
    if case == "other_users_fact":
        fact = desk_graph.other_fact
    if case == "short_reason":
        kw["reason"] = "wrong"
    if case == "two_word_reason":
        kw["reason"] = "completely wrongheaded"
    if case == "bad_ticket":
        kw["ticket"] = "SUP 12; DROP"
    before_all = {u: state(falkordb_server, u) for u in desk_graph.facts.values()}
    other_before = state(falkordb_server, desk_graph.other_fact, DESK_OTHER)
    with pytest.raises(YuxiDashError) as refused:
        run("retract", fact, ev, memory_settings, **kw)
    assert refused.value.code == code
    if case == "viewer":
        assert isinstance(refused.value, Forbidden)
    if case == "gated_off":
        assert isinstance(refused.value, MemoryGatedOff)
    assert {u: state(falkordb_server, u) for u in desk_graph.facts.values()} == before_all
    assert state(falkordb_server, desk_graph.other_fact, DESK_OTHER) == other_before
    assert hits(memory_settings, desk_graph.facts["dark"]) == b"2"
    rows = memory_audit(memory_settings, DESK_USER)
    assert [(r.action, r.outcome, r.detail.get("code")) for r in rows] == [
        ("memory.retract", "refused", code)
    ]
    with session_scope(memory_settings) as session:
        assert session.query(MemoryCorrection).count() == 0


def test_undo_of_an_unknown_audit_row_is_refused(flags, memory_settings, desk_graph) -> None:
    with pytest.raises(YuxiDashError) as missing:
        corrections.undo_correction(
            999_999, actor=OPERATOR, settings=memory_settings, evaluator=flags[1]
        )
    assert missing.value.code == "correction_not_found"
    with pytest.raises(YuxiDashError) as viewer:
        corrections.undo_correction(1, actor=VIEWER, settings=memory_settings, evaluator=flags[1])
    assert viewer.value.code == "forbidden"


def test_supersede_needs_a_different_text(
    desk_graph: DeskGraph, flags, memory_settings, falkordb_server
) -> None:
    fact = desk_graph.facts["caching"]
    before = state(falkordb_server, fact)
    for text in (None, "", "Desk User is interested in caching for the onboarding flow"):
        with pytest.raises(YuxiDashError) as refused:
            run("supersede", fact, flags[1], memory_settings, text=text)
        assert refused.value.code == "invalid_input"
    assert state(falkordb_server, fact) == before


def test_two_corrections_of_one_fact_at_once_apply_one_after_the_other(
    db_url: str, desk_graph: DeskGraph, flags, memory_settings, falkordb_server, monkeypatch
) -> None:
    """Both operators read the fact before either writes, unless the fact's lock orders them.

    With the lock the second retract waits, then finds the fact retracted and is
    refused (`already_invalidated`); without it both would write, the second over
    the first, each with its own correction row.
    """
    fact = desk_graph.facts["dark"]
    real_load = corrections.load_edge

    async def slow_load(driver: FalkorDriver, uuid: str) -> EntityEdge | None:
        edge = await real_load(driver, uuid)
        await asyncio.sleep(0.5)
        return edge

    monkeypatch.setattr(corrections, "load_edge", slow_load)
    outcomes: list[str] = []

    def attempt() -> None:
        try:
            run("retract", fact, flags[1], memory_settings)
            outcomes.append("ok")
        except YuxiDashError as exc:
            outcomes.append(exc.code)

    workers = [threading.Thread(target=attempt) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert sorted(outcomes) == ["already_invalidated", "ok"]
    with session_scope(memory_settings) as session:
        written = session.query(MemoryCorrection).filter_by(fact_uuid=fact).count()
    assert written == 1
    actions = [(r.action, r.outcome) for r in memory_audit(memory_settings, DESK_USER)]
    assert actions.count(("memory.retract", "ok")) == 1
    assert actions.count(("memory.retract", "refused")) == 1
