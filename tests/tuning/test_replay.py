"""yuxi_dash.tuning.replay: a recorded thread replayed turn by turn through the engine.

The fleet is made by really running our engine (`tests.tuning.fleet_builders`): the replay under
the settings in force must summarize at the very turns the middleware did, and send the
same input tokens at every model call.
"""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import SystemMessage

from tests.fixtures.profiles import examples
from tests.store.compression_builders import cited_thread
from tests.tuning.fleet_builders import (
    KEEP,
    LIMIT,
    THRESHOLD_K,
    recorded_peak,
    recorded_summaries,
    simulated_fleet,
)
from yuxi_dash.compression import (
    ExtractiveSummarizer,
    ThreadContextState,
    count_tokens,
    estimate_summary,
)
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import get_settings
from yuxi_dash.store.compressions import count_compressions
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Conversation
from yuxi_dash.tuning.recorded import RecordedThread, load_recorded, thread_rows
from yuxi_dash.tuning.replay import (
    CompressionSettings,
    ThreadReplay,
    replay_thread,
    stand_in_system,
)

IN_FORCE = CompressionSettings(THRESHOLD_K, LIMIT, KEEP)


def _recorded() -> list[RecordedThread]:
    settings = get_settings()
    with session_scope() as session:
        rows = thread_rows(session, "tiny-agent")
    loaded = list(load_recorded(rows, settings, Workdir(settings.workdir)))
    assert all(isinstance(thread, RecordedThread) for thread in loaded)
    return [thread for thread in loaded if isinstance(thread, RecordedThread)]


def _replay(thread: RecordedThread, config: CompressionSettings) -> ThreadReplay:
    return replay_thread(thread, config, summarizer=ExtractiveSummarizer())


def test_the_settings_in_force_reproduce_the_engines_compressions() -> None:
    ids = simulated_fleet(threads=3, turns=10)
    threads = _recorded()
    assert [thread.thread_id for thread in threads] == ids
    summarized_somewhere = 0
    for thread in threads:
        assert thread.unrestored == 0 and thread.overhead_tokens > 0  # the tools' schemas
        replay = _replay(thread, IN_FORCE)
        summarized, inputs = recorded_summaries(thread.thread_id)
        assert list(replay.compression_turns) == summarized  # compressions are summaries
        assert list(replay.input_tokens) == inputs  # every model call, token for token
        with session_scope() as session:
            assert count_compressions(session, thread.thread_id) == len(summarized)
            ratio = session.scalar(  # the pressure the Overview shows (its >= 85% figure)
                sa.select(Conversation.summary_pressure_ratio).where(
                    Conversation.thread_id == thread.thread_id
                )
            )
            assert replay.end_ratio == ratio
        summarized_somewhere += len(summarized)
    assert summarized_somewhere >= 2  # the fleet did cross its threshold


def test_a_threshold_above_every_recorded_peak_triggers_none() -> None:
    """The fleet ran with a threshold it never reached, so what it recorded is uncompressed:
    a threshold above its recorded peak (usage snapshots, not the replay) triggers nothing."""
    simulated_fleet(threads=2, turns=8, threshold_k=200)
    for thread in _recorded():
        peak = recorded_peak(thread.thread_id)
        assert 0 < peak < 200 * 1024
        replay = _replay(thread, CompressionSettings(peak // 1024 + 1, LIMIT, KEEP))
        assert replay.compression_turns == () and replay.offload_turns == ()
        assert replay.evidence_from != "ledger"  # no summary: a preview's, if any
        _summarized, inputs = recorded_summaries(thread.thread_id)
        assert list(replay.input_tokens) == inputs  # nothing offloaded or summarized
        lower = _replay(thread, CompressionSettings(max(1, peak // 1024 - 1), LIMIT, KEEP))
        assert lower.compression_turns or lower.offload_turns  # just under it: one pass


def test_lowering_the_threshold_never_triggers_fewer_compressions() -> None:
    """Compressions are summaries, as the platform counts them: fewer at a lower threshold
    would be a replay bug. The offload-only passes are not monotone, and that is the engine's
    design: on seed 5's second thread, one pass at 8 K offloads results that 9 K offloads in
    two passes."""
    simulated_fleet(threads=2, turns=10, seed=5)
    threads = _recorded()

    @settings(max_examples=examples(60))
    @given(high=st.integers(min_value=2, max_value=24), drop=st.integers(min_value=1, max_value=20))
    def lower_is_never_fewer(high: int, drop: int) -> None:
        low = max(1, high - drop)
        for thread in threads:
            at_high = _replay(thread, CompressionSettings(high, LIMIT, KEEP))
            at_low = _replay(thread, CompressionSettings(low, LIMIT, KEEP))
            assert len(at_low.compression_turns) >= len(at_high.compression_turns)
            if at_high.compression_turns:  # the first compression comes no later
                assert at_low.compression_turns[0] <= at_high.compression_turns[0]

    lower_is_never_fewer()


def test_the_stand_in_system_message_counts_as_the_overhead() -> None:
    assert stand_in_system(4) is None
    for overhead in (5, 6, 7, 8, 241, 1_999):
        system = stand_in_system(overhead)
        assert isinstance(system, SystemMessage)
        assert count_tokens([system]) == overhead


def test_cited_evidence_comes_from_the_ledger_else_from_the_preview() -> None:
    thread = RecordedThread("t-cited", "ours", tuple(cited_thread(turns=8)))
    summarized = _replay(thread, CompressionSettings(1, LIMIT, 4))
    assert summarized.compression_turns and summarized.evidence_from == "ledger"
    assert 0 < summarized.cited_in_view <= summarized.cited_total
    untouched = _replay(thread, CompressionSettings(100, LIMIT, 4))
    assert untouched.compression_turns == () and untouched.evidence_from == "preview"
    estimate = estimate_summary(
        ThreadContextState(thread_id="t-cited", messages=list(thread.messages)),
        summarizer=ExtractiveSummarizer(),
        keep_messages=4,
        tool_result_token_limit=LIMIT,
    )
    assert (untouched.cited_total, untouched.cited_in_view) == (
        estimate.cited_total,
        estimate.cited_in_view,
    )
    assert untouched.cited_total > 0


def test_an_agent_without_compression_is_a_pass_through() -> None:
    thread = RecordedThread("t-cited", "ours", tuple(cited_thread(turns=8)))
    plain = replay_thread(
        thread, CompressionSettings(1, LIMIT, 4), summarizer=ExtractiveSummarizer(), compress=False
    )
    assert plain.compression_turns == () and plain.offload_turns == ()
    assert list(plain.input_tokens) == sorted(plain.input_tokens)  # only ever grows
    assert plain.peak_tokens == plain.end_tokens > plain.input_tokens[-1]
