"""The bulk retract of a user's assistant-only facts and its undo in one step, on SQLite and
PostgreSQL, through graphiti-core's own classes: the preview, the parent audit row with the
per-fact rows, the refusals (each one typed error and one audit row, nothing changed), a
bulk that fails half-way putting back what it had done (and naming its parent row when it
cannot), and the undo: all of it under every fact's lock, a fact already back skipped, an
undo failing half-way leaving every fact as it was, an admin undoing another's bulk.
"""

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

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.assistant_only_graph import (
    DAY_2,
    EARLY,
    WORDS_USER,
    WordsGraph,
    plant_words,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import FactBusy, YuxiDashError
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.correction_rules import edge_from_snapshot, snapshot
from yuxi_dash.memory.graph.fact_writer import FactWriter, save_edge
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.quality import assistant_only as ao
from yuxi_dash.memory.support import bulk_retract as bulk
from yuxi_dash.memory.support import corrections
from yuxi_dash.memory.views.gate import open_view
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import MemoryCorrection

OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)
OTHER_OPERATOR = Actor(id="other-ops@example.com", role=Role.OPERATOR)
ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)
VIEWER = Actor(id="viewer@example.com", role=Role.VIEWER)
REASON = "the assistant's guesses are not the user's memory"
BEFORE = DAY_2.isoformat()


@pytest.fixture
def words_graph(falkordb_server: ServerHandle, memory_settings) -> Iterator[WordsGraph]:
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_words(client)
    finally:
        client.close()


@pytest.fixture
def ev(memory_settings) -> Iterator[FlagEvaluator]:
    data = TestData.data_source()
    data.update(data.flag("graphiti-memory").variation_for_all(True))
    data.update(data.flag("graphiti-communities-enabled").variation_for_all(False))
    evaluator = FlagEvaluator.from_test_data(memory_settings, data)
    yield evaluator
    evaluator.close()


def states(server: ServerHandle, graph: WordsGraph) -> dict[str, dict[str, Any] | None]:
    """Every fact as graphiti-core's EntityEdge.get_by_uuid reads it (embedding dropped)."""

    async def go() -> dict[str, dict[str, Any] | None]:
        db = AsyncFalkorDB(**server.redis_kwargs())  # type: ignore[arg-type]
        driver = FalkorDriver(falkor_db=db, database=graph.group_id)
        out: dict[str, dict[str, Any] | None] = {}
        try:
            for uuid in graph.facts.values():
                try:
                    snap = snapshot(await EntityEdge.get_by_uuid(driver, uuid))
                except Exception:  # noqa: BLE001 - EdgeNotFoundError: gone
                    out[uuid] = None
                    continue
                snap.pop("fact_embedding")
                for key in ("source_uuid", "target_uuid"):
                    snap["attributes"].pop(key, None)
                out[uuid] = snap
        finally:
            await db.aclose()
        return out

    return asyncio.run(go())


def share(settings, ev) -> float | None:
    access = open_view(WORDS_USER, ao.VIEW, actor=VIEWER, settings=settings, evaluator=ev)
    return ao.assistant_only_share(access)["assistant_only_share"]


def undo_rows(settings) -> list[tuple[int | None, str | None]]:
    """(batch_audit_id, reason) of every undo row."""
    with session_scope(settings) as session:
        return [
            (r.batch_audit_id, r.reason)
            for r in session.query(MemoryCorrection).filter_by(action="undo")
        ]


def corrections_rows(settings) -> list[tuple[str, int | None, bool]]:
    with session_scope(settings) as session:
        return [
            (r.action, r.batch_audit_id, r.undone_by_audit_id is not None)
            for r in session.query(MemoryCorrection).order_by(MemoryCorrection.audit_id)
        ]


def preview(settings, ev, actor: Actor = OPERATOR) -> dict[str, Any]:
    return bulk.preview_bulk_retract(
        WORDS_USER, BEFORE, actor=actor, settings=settings, evaluator=ev
    )


def run_bulk(settings, ev, token: str, **kw: Any) -> dict[str, Any]:
    kw.setdefault("actor", OPERATOR)
    kw.setdefault("reason", REASON)
    kw.setdefault("before", BEFORE)
    return bulk.bulk_retract(WORDS_USER, token=token, settings=settings, evaluator=ev, **kw)


def test_bulk_retract_then_undo_in_one_step_audited(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server
) -> None:
    before = states(falkordb_server, words_graph)
    shown = preview(memory_settings, ev)
    early = words_graph.uuids(EARLY)
    assert shown["count"] == 3 and [f["uuid"] for f in shown["facts"]] == early
    assert shown["preview_token"] == ao.preview_token(WORDS_USER, DAY_2, early)
    assert states(falkordb_server, words_graph) == before  # a preview changes nothing

    done = run_bulk(memory_settings, ev, shown["preview_token"], ticket="SUP-77")
    assert done["count"] == 3 and done["fact_uuids"] == early
    after = states(falkordb_server, words_graph)
    for uuid, snap in after.items():
        if uuid in early:
            assert snap is not None and snap["attributes"]["status"] == "retracted"
            assert snap["expired_at"] is not None and snap["invalid_at"] is not None
        else:
            assert snap == before[uuid]
    assert share(memory_settings, ev) == 2 / 10
    parent = done["audit_id"]
    assert corrections_rows(memory_settings) == [("retract", parent, False)] * 3
    audit = [
        (r.id, r.action, r.outcome, r.detail) for r in memory_audit(memory_settings, WORDS_USER)
    ]
    bulk_rows = [a for a in audit if a[1] == "memory.bulk_retract"]
    assert [(a[0], a[2], a[3]["retracted"], a[3]["facts"]) for a in bulk_rows] == [
        (parent, "ok", 3, 3)
    ]
    per_fact = [a for a in audit if a[1] == "memory.retract"]
    assert sorted(a[3]["fact_uuid"] for a in per_fact) == sorted(early)
    assert {(a[2], a[3]["batch_audit_id"]) for a in per_fact} == {("ok", parent)}
    assert "reason" not in bulk_rows[0][3]

    undone = bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert undone["count"] == 3 and sorted(undone["fact_uuids"]) == sorted(early)
    assert states(falkordb_server, words_graph) == before
    assert share(memory_settings, ev) == 5 / 13
    rows = corrections_rows(memory_settings)
    assert rows[:3] == [("retract", parent, True)] * 3 and [r[0] for r in rows[3:]] == ["undo"] * 3
    assert [r[1] for r in rows[3:]] == [undone["audit_id"]] * 3  # each names its bulk undo
    undo_audit = [r for r in memory_audit(memory_settings, WORDS_USER) if r.action == "memory.undo"]
    assert {r.detail["batch_audit_id"] for r in undo_audit} == {undone["audit_id"]}
    with pytest.raises(YuxiDashError) as twice:
        bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert twice.value.code == "already_undone"
    actions = [(r.action, r.outcome) for r in memory_audit(memory_settings, WORDS_USER)]
    assert actions.count(("memory.bulk_undo", "ok")) == 1
    assert actions.count(("memory.bulk_undo", "refused")) == 1
    assert actions.count(("memory.undo", "ok")) == 3


def test_refusals_are_typed_audited_and_change_nothing(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server
) -> None:
    token = preview(memory_settings, ev)["preview_token"]
    before = states(falkordb_server, words_graph)
    with pytest.raises(YuxiDashError) as viewer:
        preview(memory_settings, ev, VIEWER)
    assert viewer.value.code == "forbidden"
    attempts: list[tuple[dict[str, Any], str]] = [
        ({"actor": VIEWER}, "forbidden"),
        ({"before": "yesterday-ish"}, "invalid_moment"),
        ({"reason": "oops"}, "reason_required"),
        ({"token": ""}, "invalid_input"),
        ({"token": "0" * 32}, "preview_stale"),
        ({"before": "2026-03-01T10:00:00Z"}, "preview_stale"),  # another moment: another set
        (
            {
                "before": "2026-01-01T00:00:00Z",
                "token": ao.preview_token(WORDS_USER, ao.parse_moment("2026-01-01T00:00:00Z"), []),
            },
            "fact_not_found",
        ),
    ]
    for kw, code in attempts:
        kw = {"token": token, **kw}
        with pytest.raises(YuxiDashError) as refused:
            run_bulk(memory_settings, ev, **kw)
        assert refused.value.code == code, kw
    # the set changed since the preview: one of its facts was retracted on its own
    corrections.retract(
        WORDS_USER,
        words_graph.facts[2],
        actor=OPERATOR,
        reason=REASON,
        settings=memory_settings,
        evaluator=ev,
    )
    changed = states(falkordb_server, words_graph)
    with pytest.raises(YuxiDashError) as stale:
        run_bulk(memory_settings, ev, token)
    assert stale.value.code == "preview_stale" and stale.value.exit_code == 4
    assert states(falkordb_server, words_graph) == changed
    assert {u: s for u, s in changed.items() if u != words_graph.facts[2]} == {
        u: s for u, s in before.items() if u != words_graph.facts[2]
    }
    assert corrections_rows(memory_settings) == [("retract", None, False)]
    refused_rows = [
        (r.action, r.outcome, r.detail["code"])
        for r in memory_audit(memory_settings, WORDS_USER)
        if r.action.startswith("memory.bulk_retract")
    ]
    expected = [("memory.bulk_retract_preview", "refused", "forbidden")]
    expected += [("memory.bulk_retract", "refused", code) for _kw, code in attempts]
    expected += [("memory.bulk_retract", "refused", "preview_stale")]
    assert sorted(refused_rows) == sorted(expected)


def test_undo_by_another_operator_or_after_a_change_is_refused(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server
) -> None:
    token = preview(memory_settings, ev)["preview_token"]
    parent = run_bulk(memory_settings, ev, token)["audit_id"]
    retracted = states(falkordb_server, words_graph)
    undo = {"settings": memory_settings, "evaluator": ev}
    with pytest.raises(YuxiDashError) as other:
        bulk.undo_bulk_retract(parent, actor=OTHER_OPERATOR, reason=REASON, **undo)
    assert other.value.code == "not_your_correction"
    corrections.restore(WORDS_USER, words_graph.facts[3], actor=OPERATOR, reason=REASON, **undo)
    changed = states(falkordb_server, words_graph)
    with pytest.raises(YuxiDashError) as stale:
        bulk.undo_bulk_retract(parent, actor=OPERATOR, **undo)
    assert stale.value.code == "stale_fact"
    assert states(falkordb_server, words_graph) == changed != retracted
    with pytest.raises(YuxiDashError) as not_bulk:
        bulk.undo_bulk_retract(parent + 1, actor=OPERATOR, **undo)
    assert not_bulk.value.code == "correction_not_found"
    outcomes = [
        (r.outcome, r.detail.get("code"))
        for r in memory_audit(memory_settings, WORDS_USER)
        if r.action == "memory.bulk_undo"
    ]
    assert sorted(outcomes) == [("refused", "not_your_correction"), ("refused", "stale_fact")]


def test_an_admin_undoes_another_operators_bulk_with_a_reason_only(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server
) -> None:
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    parent = run_bulk(memory_settings, ev, token)["audit_id"]
    retracted = states(falkordb_server, words_graph)
    undo = {"settings": memory_settings, "evaluator": ev}
    with pytest.raises(YuxiDashError) as no_reason:
        bulk.undo_bulk_retract(parent, actor=ADMIN, **undo)
    assert no_reason.value.code == "reason_required"
    assert states(falkordb_server, words_graph) == retracted
    done = bulk.undo_bulk_retract(parent, actor=ADMIN, reason=REASON, **undo)
    assert done["count"] == 3 and states(falkordb_server, words_graph) == before
    assert undo_rows(memory_settings) == [(done["audit_id"], REASON)] * 3
    rows = [
        (r.actor, r.outcome, r.detail.get("code"), r.detail.get("own"))
        for r in memory_audit(memory_settings, WORDS_USER)
        if r.action == "memory.bulk_undo"
    ]
    assert sorted(rows, key=str) == sorted(
        [(ADMIN.id, "refused", "reason_required", False), (ADMIN.id, "ok", None, False)], key=str
    )


def test_the_undo_holds_every_facts_lock_so_a_concurrent_change_waits(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server, monkeypatch
) -> None:
    """The reviewer's case: another operator restores fact 2 while the bulk undo runs.

    Without the locks held from the check to the last write, the restore lands between the
    check and fact 2's undo: the undo stops half-way and cannot be run again. With them, the
    restore waits for the whole undo, then finds fact 2 active and is refused."""
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    parent = run_bulk(memory_settings, ev, token)["audit_id"]
    early = words_graph.uuids(EARLY)
    real = corrections.undo_correction
    calls: list[int] = []
    outcomes: list[str] = []

    def restore_fact_2() -> None:
        try:
            corrections.restore(
                WORDS_USER,
                early[1],
                actor=OTHER_OPERATOR,
                reason=REASON,
                settings=memory_settings,
                evaluator=ev,
            )
            outcomes.append("ok")
        except YuxiDashError as exc:
            outcomes.append(exc.code)

    worker = threading.Thread(target=restore_fact_2)

    def racy(audit_id: int, **kw: Any) -> dict[str, Any]:
        calls.append(audit_id)
        if len(calls) == 2:  # the other operator starts between the check and fact 2's undo
            worker.start()
            worker.join(timeout=1.0)  # a restore that took no lock would be done by now
        return real(audit_id, **kw)

    monkeypatch.setattr(bulk.corrections, "undo_correction", racy)
    done = bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    worker.join(timeout=60)
    assert done["count"] == 3
    assert states(falkordb_server, words_graph) == before
    assert outcomes and outcomes[0] in ("not_invalidated", "fact_busy")


def test_a_fact_already_back_in_its_pre_bulk_state_is_skipped(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server
) -> None:
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    parent = run_bulk(memory_settings, ev, token)["audit_id"]
    early = words_graph.uuids(EARLY)
    with session_scope(memory_settings) as session:
        row = session.query(MemoryCorrection).filter_by(fact_uuid=early[0]).one()
        snap = dict(row.before[early[0]])
    writer = FactWriter(memory_settings, words_graph.group_id)
    writer.run(lambda driver: save_edge(driver, edge_from_snapshot(snap)))  # put back by hand
    done = bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert (done["count"], done["skipped"]) == (2, 1)
    assert sorted(done["fact_uuids"]) == sorted(early[1:])
    assert states(falkordb_server, words_graph) == before


def test_an_undo_failing_half_way_leaves_every_fact_retracted_and_can_run_again(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server, monkeypatch
) -> None:
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    parent = run_bulk(memory_settings, ev, token)["audit_id"]
    retracted = states(falkordb_server, words_graph)
    real = corrections.undo_correction
    calls: list[int] = []

    def third_is_busy(audit_id: int, **kw: Any) -> dict[str, Any]:
        calls.append(audit_id)
        if len(calls) == 3:
            raise FactBusy("fact is being corrected by another operator; try again shortly")
        return real(audit_id, **kw)

    monkeypatch.setattr(bulk.corrections, "undo_correction", third_is_busy)
    with pytest.raises(YuxiDashError) as busy:
        bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert busy.value.code == "fact_busy"
    assert states(falkordb_server, words_graph) == retracted  # the two undone were put back
    assert corrections_rows(memory_settings) == [("retract", parent, False)] * 3
    monkeypatch.setattr(bulk.corrections, "undo_correction", real)
    done = bulk.undo_bulk_retract(parent, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert done["count"] == 3 and states(falkordb_server, words_graph) == before
    outcomes = [
        (r.outcome, r.detail.get("code"))
        for r in memory_audit(memory_settings, WORDS_USER)
        if r.action == "memory.bulk_undo"
    ]
    assert sorted(outcomes, key=str) == sorted([("refused", "fact_busy"), ("ok", None)], key=str)


def test_a_bulk_that_fails_half_way_puts_back_what_it_did(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server, monkeypatch
) -> None:
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    real = corrections.retract
    calls: list[str] = []

    def third_is_busy(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
        calls.append(fact_uuid)
        if len(calls) == 3:
            raise FactBusy("fact is being corrected by another operator; try again shortly")
        return real(user_id, fact_uuid, **kw)

    monkeypatch.setattr(bulk.corrections, "retract", third_is_busy)
    with pytest.raises(YuxiDashError) as busy:
        run_bulk(memory_settings, ev, token)
    assert busy.value.code == "fact_busy"
    assert states(falkordb_server, words_graph) == before
    parents = [
        (r.outcome, r.detail)
        for r in memory_audit(memory_settings, WORDS_USER)
        if r.action == "memory.bulk_retract"
    ]
    assert [(o, d["code"], d["retracted"], d["rolled_back"]) for o, d in parents] == [
        ("failed", "fact_busy", 2, 2)
    ]


def test_a_failed_bulk_whose_undo_fails_too_names_its_parent_row(
    db_url: str, words_graph: WordsGraph, memory_settings, ev, falkordb_server, monkeypatch
) -> None:
    before = states(falkordb_server, words_graph)
    token = preview(memory_settings, ev)["preview_token"]
    real_retract, real_undo = corrections.retract, corrections.undo_correction
    calls: list[str] = []

    def third_is_busy(user_id: str, fact_uuid: str, **kw: Any) -> dict[str, Any]:
        calls.append(fact_uuid)
        if len(calls) == 3:
            raise FactBusy("fact is being corrected by another operator; try again shortly")
        return real_retract(user_id, fact_uuid, **kw)

    def undo_is_busy(audit_id: int, **kw: Any) -> dict[str, Any]:
        raise FactBusy("fact is being corrected by another operator; try again shortly")

    monkeypatch.setattr(bulk.corrections, "retract", third_is_busy)
    monkeypatch.setattr(bulk.corrections, "undo_correction", undo_is_busy)
    with pytest.raises(YuxiDashError) as incomplete:
        run_bulk(memory_settings, ev, token)
    [parent] = [
        r for r in memory_audit(memory_settings, WORDS_USER) if r.action == "memory.bulk_retract"
    ]
    assert incomplete.value.code == "bulk_incomplete"
    assert f"yuxi-dash memory undo {parent.id}" in incomplete.value.message
    assert (parent.outcome, parent.detail["retracted"], parent.detail["rolled_back"]) == (
        "failed",
        2,
        0,
    )
    monkeypatch.setattr(bulk.corrections, "undo_correction", real_undo)
    done = bulk.undo_bulk_retract(parent.id, actor=OPERATOR, settings=memory_settings, evaluator=ev)
    assert done["count"] == 2 and states(falkordb_server, words_graph) == before
