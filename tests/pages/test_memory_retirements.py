"""AppTest: retirements that look wrong on the Facts page (Restore, Undo) and the overview's count.

Real FalkorDB graph written with graphiti-core's classes (`plant_retirements`), the
demo's flag file, the real store: Restore writes the audited correction and the fact
is live again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from tests.fixtures.graph import make_client, memory_audit
from tests.memory.quality.retirement_graph import RETIRE_USER, RetireGraph, plant_retirements
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.memory.graph.server import ServerHandle
from yuxi_dash.memory.support import corrections
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry, MemoryCorrection
from yuxi_dash.ui.memory_facts import clear_desk_caches
from yuxi_dash.ui.memory_review import retirements as retirement_ui
from yuxi_dash.ui.memory_review.retirements import clear_retirement_caches

REASON = "the user says they still code in Rust"


@pytest.fixture
def retire_graph(falkordb_server: ServerHandle, memory_settings) -> Iterator[RetireGraph]:
    clear_retirement_caches()
    clear_desk_caches()
    client = make_client(falkordb_server, memory_settings)
    try:
        yield plant_retirements(client)
    finally:
        client.close()


def _text(at) -> str:
    return " ".join(str(m.value) for m in [*at.markdown, *at.caption, *at.info, *at.success])


def test_restore_from_the_suspicious_list(memory_pages, retire_graph: RetireGraph, graph_client):
    rust = retire_graph.facts["rust"]
    at = memory_pages("memory_facts.py", RETIRE_USER, retire_show=True)
    assert not at.exception
    assert "4 retired fact(s)" in _text(at)
    at = at.toggle(key="retire_suspicious").set_value(True).run()
    assert not at.exception
    restore = [b for b in at.button if str(b.key).startswith("retire_restore_button:")]
    assert [b.key for b in restore] == [f"retire_restore_button:{rust}"]
    shown = _text(at)
    assert "suspicious" in shown and "Bob likes tea" in shown and "Rust compiles to wasm" in shown
    at = restore[0].click().run()
    # graphiti's contradiction set its invalid_at too: the form says Restore clears it
    assert any("Restoring also clears its end date" in w.value for w in at.warning)
    [reason] = [w for w in at.text_input if str(w.key).startswith("retire_reason:")]
    reason.input(REASON)
    [confirm] = [w for w in at.checkbox if str(w.key).startswith("retire_confirm:")]
    confirm.check()
    [submit] = [b for b in at.button if b.label == "Restore this fact"]
    at = submit.click().run()
    assert not at.exception
    assert "restore done — audit row" in _text(at)
    assert "No suspicious retirements for this user." in [i.value for i in at.info]
    live = graph_client.ro_rows(
        retire_graph.group_id,
        "MATCH ()-[e:RELATES_TO]->() WHERE e.uuid = $u RETURN e.expired_at AS x, e.status AS s",
        {"u": rust},
    )
    assert live == [{"x": None, "s": "active"}]
    settings = get_settings()
    with session_scope(settings) as session:
        [(action, audit_id, reason_text)] = session.execute(
            sa.select(
                MemoryCorrection.action, MemoryCorrection.audit_id, MemoryCorrection.reason
            ).where(MemoryCorrection.fact_uuid == rust)
        ).all()
        audit = session.get(AuditEntry, audit_id)
        assert audit is not None and audit.action == "memory.restore" and audit.outcome == "ok"
    assert action == "restore" and reason_text == REASON
    views = [r.detail.get("view") for r in memory_audit(settings, RETIRE_USER)]
    assert "retirements" in views


def test_the_list_is_read_only_on_request(memory_pages, retire_graph: RetireGraph) -> None:
    """The Facts page opens without reading the retirements (no look, no audit row)."""
    at = memory_pages("memory_facts.py", RETIRE_USER)
    assert not at.exception
    assert "retired fact(s)" not in _text(at)
    assert _retirement_looks() == 0
    at = at.toggle(key="retire_show").set_value(True).run()
    assert "4 retired fact(s)" in _text(at)
    assert _retirement_looks() == 1


def _retirement_looks() -> int:
    rows = memory_audit(get_settings(), RETIRE_USER)
    return sum(1 for row in rows if (row.detail or {}).get("view") == "retirements")


def test_restore_needs_the_confirmation(memory_pages, retire_graph: RetireGraph) -> None:
    at = memory_pages("memory_facts.py", RETIRE_USER, retire_show=True, retire_suspicious=True)
    at = at.button(key=f"retire_restore_button:{retire_graph.facts['rust']}").click().run()
    [reason] = [w for w in at.text_input if str(w.key).startswith("retire_reason:")]
    reason.input(REASON)
    at = next(b for b in at.button if b.label == "Restore this fact").click().run()
    assert "Tick the confirmation box first." in [w.value for w in at.warning]
    with session_scope(get_settings()) as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(MemoryCorrection)) == 0


def test_the_overview_counts_suspicious_retirements_per_user(
    memory_pages, retire_graph: RetireGraph
) -> None:
    at = memory_pages("memory_overview.py", RETIRE_USER)
    at = next(b for b in at.button if b.label == "Count suspicious retirements").click().run()
    assert not at.exception
    table = at.dataframe[-1].value
    mine = table[table["user_id"] == RETIRE_USER].iloc[0]
    assert int(mine["suspicious"]) == 1 and int(mine["retired"]) == 4
    assert bool(table[table["user_id"] == "dmitri_ivanov"]["gated_off"].iloc[0])
    assert "with suspicious retirements" in _text(at)


def test_a_viewer_sees_the_list_but_no_restore_nor_fleet_count(
    memory_pages, retire_graph: RetireGraph, monkeypatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")  # the local user: a viewer
    get_settings.cache_clear()
    at = memory_pages("memory_facts.py", RETIRE_USER, retire_show=True, retire_suspicious=True)
    assert not at.exception
    assert "Rust compiles to wasm" in _text(at)
    assert "Restoring a fact, or undoing a correction, needs the operator role." in _text(at)
    assert not [b for b in at.button if str(b.key).startswith("retire_restore_button:")]
    at = memory_pages("memory_overview.py", RETIRE_USER)
    assert not at.exception
    assert not [b for b in at.button if b.label == "Count suspicious retirements"]


def test_the_list_pages(memory_pages, retire_graph: RetireGraph, monkeypatch) -> None:
    monkeypatch.setattr(retirement_ui, "PAGE_SIZE", 3)
    at = memory_pages("memory_facts.py", RETIRE_USER, retire_show=True)
    first = [str(b.key) for b in at.button if str(b.key).startswith("retire_restore_button:")]
    facts = retire_graph.facts
    # jazz, rust, then "Bob liked tea in 2020": written already ended, no Restore
    assert first == [f"retire_restore_button:{facts[k]}" for k in ("jazz", "rust")]
    assert "No Restore: written already ended" in _text(at)
    at = at.number_input(key="retire_page").set_value(2).run()
    assert not at.exception
    second = [str(b.key) for b in at.button if str(b.key).startswith("retire_restore_button:")]
    assert second == [f"retire_restore_button:{retire_graph.facts['paris']}"]  # the oldest


def test_a_row_our_correction_retired_offers_undo_not_restore(
    memory_pages, retire_graph: RetireGraph, graph_client
) -> None:
    dark = retire_graph.facts["dark"]
    done = corrections.retract(
        RETIRE_USER, dark, actor=Actor(id="operator@localhost", role=Role.OPERATOR), reason=REASON
    )
    at = memory_pages("memory_facts.py", RETIRE_USER, retire_show=True)
    assert not at.exception
    button = at.button(key=f"retire_restore_button:{dark}")
    assert button.label == "Undo our correction"
    at = button.click().run()
    [reason] = [w for w in at.text_input if str(w.key).startswith("retire_reason:")]
    reason.input(REASON)
    [confirm] = [w for w in at.checkbox if str(w.key).startswith("retire_confirm:")]
    confirm.check()
    [submit] = [b for b in at.button if b.label.startswith("Undo our retract (audit row")]
    at = submit.click().run()
    assert not at.exception
    assert "undo done — audit row" in _text(at)
    live = graph_client.ro_rows(
        retire_graph.group_id,
        "MATCH ()-[e:RELATES_TO]->() WHERE e.uuid = $u RETURN e.expired_at AS x",
        {"u": dark},
    )
    assert live == [{"x": None}]
    with session_scope(get_settings()) as session:
        row = session.scalar(
            sa.select(MemoryCorrection).where(MemoryCorrection.audit_id == done["audit_id"])
        )
        assert row is not None and row.undone_by_audit_id is not None
    assert not [b for b in at.button if str(b.key) == f"retire_restore_button:{dark}"]
