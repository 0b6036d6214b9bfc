"""Recorded fleets for the tuning tests, made by really running our engine.

`simulated_fleet` plays threads through `yuxi_dash.sim.run.simulate`: a real
`create_agent` graph with our compression middleware and the extractive summarizer,
its checkpoints in our checkpointer and projected into our tables (one usage snapshot per
model call, `auto_compaction` where the middleware summarized, a compression record per
summary). `recorded_summaries` reads back the turns the engine summarized at;
`recorded_peak` the largest input any recorded model call was sent or would send next.
"""

from __future__ import annotations

import sqlalchemy as sa

from yuxi_dash.service import upsert_agent
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sim.run import simulate
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import UsageSnapshotRow

AGENT = "tiny-agent"
THRESHOLD_K = 8  # 8,192 tokens: summaries within a few turns
KEEP = 10
LIMIT = 300


def simulated_fleet(
    *,
    threads: int = 3,
    turns: int = 10,
    seed: int = 11,
    threshold_k: int = THRESHOLD_K,
    capabilities: tuple[str, ...] = ("context_compression",),
    settings: Settings | None = None,
) -> list[str]:
    """``threads`` threads of ``turns`` turns of the tiny agent; their ids, each checked to be
    projected with its recorded model calls."""
    settings = settings or get_settings()
    with session_scope(settings) as session:
        upsert_agent(
            session,
            AGENT,
            name="Tiny",
            capabilities=list(capabilities),
            context_window=max(32_000, 1024 * threshold_k),
            summary_threshold=threshold_k,
            summary_keep_messages=KEEP,
            summary_tool_result_token_limit=LIMIT,
        )
    report = simulate(settings, threads=threads, turns=turns, seed=seed, agent_slug=AGENT)
    ids = [thread.thread_id for thread in report.threads]
    assert len(ids) == threads, f"the simulator played {len(ids)} of {threads} threads"
    with session_scope(settings) as session:
        recorded = session.scalar(
            sa.select(sa.func.count(sa.distinct(UsageSnapshotRow.thread_id))).where(
                UsageSnapshotRow.thread_id.in_(ids)
            )
        )
    assert recorded == threads, "every played thread is projected with its model calls"
    return ids


def recorded_summaries(thread_id: str) -> tuple[list[int], list[int]]:
    """(the model calls the engine summarized before, every model call's input tokens)."""
    with session_scope() as session:
        rows = session.execute(
            sa.select(UsageSnapshotRow.source, UsageSnapshotRow.llm_input_tokens)
            .where(UsageSnapshotRow.thread_id == thread_id)
            .order_by(UsageSnapshotRow.id)
        ).all()
    summarized = [
        turn for turn, (source, _tokens) in enumerate(rows) if source == "auto_compaction"
    ]
    return summarized, [int(tokens) for _source, tokens in rows]


def recorded_peak(thread_id: str) -> int:
    """The largest input a recorded model call was sent, or said the next call would be."""
    with session_scope() as session:
        sent, following = session.execute(
            sa.select(
                sa.func.max(UsageSnapshotRow.llm_input_tokens),
                sa.func.max(UsageSnapshotRow.next_llm_input_tokens),
            ).where(UsageSnapshotRow.thread_id == thread_id)
        ).one()
    return max(int(sent or 0), int(following or 0))
