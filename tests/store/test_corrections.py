"""Migration 0003 (`memory_corrections`) on SQLite and PostgreSQL, and the rows' helpers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.store import corrections, db
from yuxi_dash.store.models import AuditEntry


def _url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'c.db'}"
    return request.getfixturevalue("fresh_postgres_url")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_0003_up_keeps_the_audit_log_and_down_drops_only_its_table(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(backend, tmp_path, request)
    db.upgrade(url, "0002")
    engine = db.create_engine_for_url(url)
    try:
        with Session(engine) as session, session.begin():
            session.add(AuditEntry(actor="a", action="x", target="t", outcome="ok", detail={}))
        db.upgrade(url, "0003")
        assert db.current_revision(url) == "0003"
        inspector = sa.inspect(engine)
        assert "memory_corrections" in inspector.get_table_names()
        columns = {c["name"] for c in inspector.get_columns("memory_corrections")}
        assert {"audit_id", "before", "after", "reason", "ticket", "undone_by_audit_id"} <= columns
        db.upgrade(url)  # the rows' helpers write today's model (later migrations add columns)
        with Session(engine) as session, session.begin():
            audit_id = session.scalar(sa.select(AuditEntry.id))
            assert audit_id is not None
            corrections.add_correction(
                session,
                id="c1",
                audit_id=audit_id,
                actor="a",
                user_id="u",
                group_id="user_u",
                fact_uuid="f",
                action="retract",
                reason="r r r",
                ticket=None,
                before={"f": {"fact": "x"}},
                after={"f": {"fact": "y"}},
                hits_before=2,
            )
        with Session(engine) as session, session.begin():
            row = corrections.by_audit_id(session, audit_id)
            assert row is not None and row.before == {"f": {"fact": "x"}}
            now = datetime.now(UTC)
            assert corrections.mark_undone(session, "c1", audit_id, now) is True
            assert corrections.mark_undone(session, "c1", audit_id, now) is False
        db.downgrade(url, "0002")
        assert "memory_corrections" not in sa.inspect(engine).get_table_names()
        with Session(engine) as session:
            assert session.scalar(sa.select(sa.func.count()).select_from(AuditEntry)) == 1
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_user_corrections_after_a_moment_without_embeddings(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`user_corrections`: only the rows after the moment, oldest first, each edge without its
    embedding (the database drops it), a null snapshot kept; `count_corrections` the rest."""
    url = _url(backend, tmp_path, request)
    db.upgrade(url)
    engine = db.create_engine_for_url(url)
    times = [datetime(2026, 1, 5, 9, minute, tzinfo=UTC) for minute in (1, 2, 3)]
    edge = {"uuid": "f", "fact": "x", "attributes": {"status": "active"}, "fact_embedding": [0.5]}
    try:
        with Session(engine) as session, session.begin():
            for n, at in enumerate(times):
                audit = AuditEntry(actor="a", action="x", target="t", outcome="ok", detail={})
                session.add(audit)
                session.flush()
                corrections.add_correction(
                    session,
                    id=f"c{n}",
                    audit_id=audit.id,
                    at=at,
                    actor="a",
                    user_id="u",
                    group_id="user_u",
                    fact_uuid="f",
                    action="supersede",
                    reason="r r r",
                    ticket=None,
                    before={"f": edge, "new": None},
                    after={"f": {**edge, "fact": "y"}, "new": edge},
                    hits_before=0,
                )
        with Session(engine) as session:
            found = corrections.user_corrections(session, "u", after=times[0], limit=10)
            assert [r["id"] for r in found] == ["c1", "c2"]
            assert found[0]["before"] == {
                "f": {"uuid": "f", "fact": "x", "attributes": {"status": "active"}},
                "new": None,
            }
            assert found[0]["after"]["f"]["fact"] == "y"
            assert "fact_embedding" not in found[0]["after"]["new"]
            assert [
                r["id"] for r in corrections.user_corrections(session, "u", after=None, limit=2)
            ] == ["c0", "c1"]
            assert corrections.user_corrections(session, "v", after=None, limit=2) == []
            assert corrections.count_corrections(session, "u", until=times[1]) == 2
            assert corrections.count_corrections(session, "u", after=times[1]) == 1
    finally:
        engine.dispose()
