"""The tuning lab's run on the page: the form, the slices with progress and Stop, the result.

A run (`tuning.fleet.TuningRun`, planned by `tuning.plan.plan_tuning`, which writes its
audit row as "pending") lives in the session. Each script run replays one slice (at most
`STEP_THREADS` threads or about `STEP_SECONDS`) inside a fragment that reruns itself
every `REFRESH_SECONDS`, so the progress bar moves. The Stop button (outside the
fragment) sets the run's stop flag: it is answered after the slice in flight, within
about `STEP_SECONDS` or one long thread. A complete or stopped run is finished once (its
row completed) and drawn; a run replaced by Run before it ended is finished as stopped; a
run an error ended shows one line. Proposal bounds are the agent's ranges
(`validation.AGENT_INT_RANGES`). Every outside string (agent, thread ids) is shown
literally.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
import streamlit as st

from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.tuning.fleet import TuningRun
from yuxi_dash.tuning.plan import plan_tuning
from yuxi_dash.tuning.recorded import agent_settings
from yuxi_dash.tuning.report import TuningResult, comparison_rows, config_lines, summary_lines
from yuxi_dash.ui.cache import settings_cached
from yuxi_dash.ui.page_text import error_line, literal, md
from yuxi_dash.ui.tuning.charts import turns_chart
from yuxi_dash.validation import AGENT_INT_RANGES

RUN_KEY = "tuning_run"
STEP_THREADS = 50  # the most threads one slice replays
STEP_SECONDS = 1.0  # a slice ends after about this long, so progress redraws
REFRESH_SECONDS = 0.5  # how soon the fragment runs the next slice
THREAD_COLUMNS = [
    "thread",
    "thread of",
    "turns",
    "compressions in force",
    "compressions proposed",
    "offload-only passes in force",
    "offload-only passes proposed",
]
TABLE_ROW_PX = 35  # st.dataframe's row height: the comparison table shows every row


@settings_cached
def tuning_agents() -> list[dict[str, Any]]:
    """Every agent with threads or a row, with its compression settings in force, by slug."""
    with session_scope(get_settings()) as session:
        return agent_settings(session)


def _setting_input(column: Any, label: str, name: str, agent: dict[str, Any]) -> int:
    """A number input within the agent's range for ``name``, at its setting (kept in range)."""
    low, high = AGENT_INT_RANGES[name]
    return int(
        column.number_input(
            literal(label),
            min_value=low,
            max_value=high,
            value=min(high, max(low, int(agent[name]))),
            key=f"tuning_{name}_{agent['slug']}",
        )
    )


def draw_form(actor: Actor, agents: list[dict[str, Any]]) -> None:
    """The agent and the proposed settings; Run plans a new run in the session."""
    slugs = [agent["slug"] for agent in agents]
    slug = st.selectbox("Agent", slugs, key="tuning_agent")
    agent = next(a for a in agents if a["slug"] == slug)
    with st.form("tuning_form"):
        cols = st.columns(4)
        k = _setting_input(
            cols[0], "Summary threshold (K tokens, x 1024)", "summary_threshold", agent
        )
        limit = _setting_input(
            cols[1], "Tool result limit (tokens)", "summary_tool_result_token_limit", agent
        )
        keep = _setting_input(cols[2], "Messages kept by a summary", "summary_keep_messages", agent)
        sample = cols[3].number_input(
            "Sample (threads; 0 = every thread)", min_value=0, value=0, key="tuning_sample"
        )
        if st.form_submit_button("Run", type="primary"):
            end_run(st.session_state.pop(RUN_KEY, None))
            try:
                st.session_state[RUN_KEY] = plan_tuning(
                    str(slug),
                    actor=actor,
                    summary_threshold_k=int(k),
                    tool_result_token_limit=int(limit),
                    keep_messages=int(keep),
                    sample=int(sample) or None,
                )
            except YuxiDashError as exc:
                st.error(literal(error_line(exc)))


def end_run(run: TuningRun | None) -> None:
    """A run being replaced: one still going is finished as stopped (its row completed)."""
    if run is not None and run.ended is None:
        run.stop()
        run.finish()


def run_slice(run: TuningRun) -> None:
    """Replay threads until the slice's thread or time budget is spent, or the run ends."""
    deadline = time.monotonic() + STEP_SECONDS
    for _ in range(STEP_THREADS):
        if run.step(1) or time.monotonic() >= deadline:
            return


def _progress(run: TuningRun) -> None:
    share = run.done / run.total if run.total else 1.0
    st.progress(share, text=md("Replayed {:,} of {:,} threads", run.done, run.total))


def draw_running(run: TuningRun) -> None:
    """The Stop button and the fragment that replays the next slice and shows progress."""
    st.button("Stop", on_click=run.stop, key="tuning_stop", icon=":material/stop:")

    @st.fragment(run_every=REFRESH_SECONDS)
    def advance() -> None:
        if not run.complete:
            try:
                run_slice(run)
            except YuxiDashError:  # the run's row says failed; the page says so once
                st.rerun(scope="app")
        _progress(run)
        if run.complete:
            st.rerun(scope="app")

    advance()


def _thread_rows(result: TuningResult) -> pd.DataFrame:
    rows = [
        {
            "thread": entry["thread_id"],
            "thread of": entry["origin"],
            "turns": entry["turns"],
            "compressions in force": entry["current"]["compressions"],
            "compressions proposed": entry["proposed"]["compressions"],
            "offload-only passes in force": entry["current"]["offload_only_passes"],
            "offload-only passes proposed": entry["proposed"]["offload_only_passes"],
        }
        for entry in result.threads
    ]
    return pd.DataFrame(rows, columns=THREAD_COLUMNS)


def draw_result(result: TuningResult) -> None:
    """The two sides, the spread and notes, a chart per thread, and the fields to copy."""
    if not result.threads_listed:
        st.info(literal(f"Agent {result.agent} has no recorded threads: nothing to replay."))
        return
    for line in summary_lines(result):
        st.caption(literal(line))
    table = pd.DataFrame(comparison_rows(result), columns=["Figure", "In force", "Proposed"])
    height = TABLE_ROW_PX * (len(table) + 1) + 3
    st.dataframe(table, hide_index=True, width="stretch", height=height)
    if result.threads:
        st.subheader("Per thread")
        st.dataframe(_thread_rows(result), hide_index=True, width="stretch")
        ids = [entry["thread_id"] for entry in result.threads]
        picked = st.selectbox("Thread to chart", ids, key="tuning_thread")
        entry = next(e for e in result.threads if e["thread_id"] == picked)
        triggers = {
            "current": result.current.settings.trigger_tokens,
            "proposed": result.proposed.settings.trigger_tokens,
        }
        st.altair_chart(turns_chart(entry, triggers), width="stretch")
    st.subheader("Configuration fields to copy")
    st.code("\n".join(config_lines(result.proposed.settings)), language="toml")
    st.download_button(
        "Download the result (JSON)",
        _json(result),  # made when the button is clicked, not on every rerun
        file_name=f"tuning-{result.agent}.json",
        mime="application/json",
    )


def _json(result: TuningResult) -> Callable[[], str]:
    return lambda: json.dumps(result.to_dict(), ensure_ascii=False)


def draw_run(run: TuningRun | None) -> None:
    """The session's run: its progress while it runs, its result once it is done."""
    if run is None:
        st.info("Pick an agent and settings, then Run: nothing is written to any thread.")
        return
    st.markdown(md("Agent **{}**", run.agent))
    if run.error is not None:
        st.error(literal(f"The run failed ({run.error}): run it again, or use the CLI's tune."))
        return
    if not run.complete:
        draw_running(run)
        return
    draw_result(run.finish())
