"""The compress dialog's preview rows (yuxi_dash.ui.compress) against a real database."""

from __future__ import annotations

from tests.service.builders import seed_thread
from yuxi_dash import service
from yuxi_dash.store.db import session_scope
from yuxi_dash.ui.compress import _literal_table, _preview_rows


def test_preview_table_uses_page_names_and_leaves_out_empty_columns() -> None:
    row = {
        "thread_id": "t-1",
        "checkpoint_id": "1f0a-checkpoint-12345678",
        "messages to summarize": 11,
        "tokens before (est.)": "7,921",
        "tokens after (est.)": "5,611",
        "note": "",
    }
    table = _literal_table([row])
    assert table.index.name == "Thread" and table.index.tolist() == ["t-1"]
    assert table.columns.tolist() == [
        "Checkpoint",
        "Messages to summarize",
        "Tokens before",
        "Tokens after (est.)",
    ]
    assert table.at["t-1", "Checkpoint"] == "…12345678"  # as thread detail shows checkpoints
    refused = {"thread_id": "t-2", "checkpoint_id": None, "note": "agent_not_found"}
    both = _literal_table([row, refused])
    assert "Note" in both.columns and both.at["t-2", "Note"] == "agent_not_found"


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


def test_preview_notes_a_change_only_against_a_checkpoint_the_list_showed(db_url: str) -> None:
    """A row listed at a checkpoint that moved since says so; a row listed before any checkpoint
    was projected (a first attach scan shows threads at their newest usage first) does not."""
    seed_thread("t-listed")
    seed_thread("t-shown", create_agent=False)
    rows = _preview_rows(
        [
            {"thread_id": "t-listed", "checkpoint_id": "an-older-checkpoint"},
            {"thread_id": "t-shown", "checkpoint_id": None},
        ]
    )
    notes = {row["thread_id"]: row["note"] for row in rows}
    assert all(row["checkpoint_id"] for row in rows)
    assert "changed since the list was loaded" in notes["t-listed"]
    assert "changed" not in notes["t-shown"]
