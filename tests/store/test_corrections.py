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
