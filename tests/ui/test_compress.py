"""The compress dialog's preview rows (yuxi_dash.ui.compress) against a real database."""

from __future__ import annotations

from yuxi_dash import service
from yuxi_dash.store.db import session_scope
from yuxi_dash.ui.compress import _preview_rows


def test_preview_notes_name_the_real_reason(db_url: str) -> None:
    with session_scope() as session:
        service.upsert_agent(session, "plain", capabilities=[])
        service.create_thread(session, "t-plain", user_id="u1", agent_slug="plain")
        service.create_thread(session, "t-orphan", user_id="u1", agent_slug="gone")
    rows = _preview_rows(  # neither thread has a checkpoint yet: the rows showed none
        [
            {"thread_id": "t-plain", "checkpoint_id": None},
            {"thread_id": "t-orphan", "checkpoint_id": None},
        ]
    )
    notes = {row["thread_id"]: row["note"] for row in rows}
    assert notes == {
        "t-plain": "agent does not support context compression",
        "t-orphan": "agent_not_found",
    }
