"""Usage writes (yuxi_dash.service.usage_writes), on SQLite and real PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tests.service.builders import seed_thread
from yuxi_dash import service
from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.errors import ImpossibleUsage, InvalidInput
from yuxi_dash.service.projection import project_thread
from yuxi_dash.service.usage_writes import reported_call
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation, UsageSnapshotRow
from yuxi_dash.store.thread_store import load_state, state_store, write_state
from yuxi_dash.usage import UsageSnapshot


def test_the_snapshot_row_the_current_usage_and_the_checkpoint_agree(db_url: str) -> None:
    """One UsageSnapshot in a checkpoint's token_usage feeds the snapshot row and the columns."""
    seeded = seed_thread()
    usage = UsageSnapshot(
        llm_input_tokens=150_000,
        next_llm_input_tokens=87_041,
        context_window=128_000,
        summary_trigger_tokens=102_400,
        summary_active=False,
    )
    written = write_state(
        "t1",
        {
            "messages": [HumanMessage("q"), AIMessage("a")],
            TOKEN_USAGE_KEY: {**usage.to_dict(), "measured_at": "2026-11-01T09:00:00+00:00"},
        },
        expected_checkpoint_id=seeded,
    )
    with service.thread_lock("t1") as (session, conv):
        assert conv is not None and conv.checkpoint_id == seeded  # projected up to the seed
        project_thread(session, conv, state_store())
    with session_scope() as session:
        row = session.scalars(sa.select(UsageSnapshotRow)).one()
        conv = session.scalar(sa.select(Conversation))
    checkpoint = load_state("t1")
    assert checkpoint is not None and checkpoint.checkpoint_id == written.checkpoint_id
    assert conv.checkpoint_id == written.checkpoint_id
    expected = usage.to_dict()
    assert {k: checkpoint.token_usage[k] for k in expected} == expected
    for name, value in expected.items():
        assert getattr(row, name) == value, name
        assert getattr(conv, name) == value, name
    assert (row.context_usage_ratio, row.summary_pressure_ratio) == (1.0, 0.85)
    assert row.source == "model_call" and row.measured_at.isoformat().startswith("2026-11-01T09")


def test_a_reported_call_is_kept_as_stated_or_refused() -> None:
    assert reported_call(None) == {"model": None, "output_tokens": None}
    assert reported_call({"llm_input_tokens": 5}) == {"model": None, "output_tokens": None}
    long = "<b>" + "m" * 200
    assert reported_call({"model": long, "output_tokens": 0}) == {
        "model": long[:128],  # stored as received, bounded
        "output_tokens": 0,
    }
    for bad in (-1, 2**31, 1.5, True, "7"):
        with pytest.raises(ImpossibleUsage):
            reported_call({"output_tokens": bad})
    with pytest.raises(InvalidInput):
        reported_call({"model": "gpt\x00"})
