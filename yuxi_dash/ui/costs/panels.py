"""The cost panels: the Overview's spend per agent and day (`draw_spend_panel`) and thread
detail's cost line and compression savings (`draw_thread_cost`); `spend_chart` is pure.

With a prices file the chart and the lines are in dollars; without one they are in tokens
and say how to see dollars (`costs.prices.NO_PRICES_HINT`); a bad file is one warning line
saying what to fix, with the tokens still shown. Calls no entry prices are never shown as
$0: one line says how many and what to add (`costs.prices.UNPRICED_ADVICE`), and when no call
of the window is priced the chart is in tokens. Keys matching no agent are named in one
line. Agent names and keys are outside strings: shown through `md`/`literal` and the
chart's data, never as markdown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import altair as alt
import pandas as pd
import streamlit as st

from yuxi_dash.costs.prices import NO_PRICES_HINT, UNPRICED_ADVICE, dollars, unmatched_line
from yuxi_dash.ui.charts import count_axis
from yuxi_dash.ui.costs import loaders
from yuxi_dash.ui.page_text import count, literal, md, stamp

SPEND_DAYS = 30  # the Overview's window: the last 30 UTC days
HINT_LINE = f"Tokens only: {NO_PRICES_HINT} (docs/operations.md shows its format)."


def spend_chart(days: pd.DataFrame, *, priced: bool) -> alt.Chart:
    """Stacked bars per UTC day and agent: dollars when ``priced`` (an unpriced row adds
    nothing: the caller says how many calls that is), else input + output tokens."""
    frame = days.copy()
    frame["day"] = pd.to_datetime(frame["day"].astype(str), utc=True)
    frame["tokens"] = frame["input_tokens"] + frame["output_tokens"]
    frame["day_text"] = [moment.strftime("%Y-%m-%d") for moment in frame["day"]]
    frame["tokens_text"] = [count(n) for n in frame["tokens"]]
    frame["cost_text"] = [dollars(v if pd.notna(v) else None) for v in frame["cost_usd"]]
    if priced:
        frame["cost"] = frame["cost_usd"].fillna(0.0)
        y = alt.Y("sum(cost):Q", title="Dollars", axis=alt.Axis(format="$,.2f"))
    else:
        y = alt.Y("sum(tokens):Q", title="Tokens", axis=count_axis())
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("utcyearmonthdate(day):T", title="Day (UTC)", axis=alt.Axis(format="%b %d")),
            y=y,
            color=alt.Color("agent:N", title="Agent"),
            tooltip=[
                alt.Tooltip("day_text:N", title="Day (UTC)"),
                alt.Tooltip("agent:N", title="Agent"),
                alt.Tooltip("tokens_text:N", title="Tokens"),
                alt.Tooltip("cost_text:N", title="Cost"),
            ],
        )
        .properties(height=220)
    )


def _prices_notice(data: dict[str, Any], unpriced_calls: int) -> None:
    """The prices file's state in one line each: bad, unset, calls without a price, keys
    matching no agent."""
    if data["error"]:
        st.warning(literal(data["error"]), icon=":material/error:")
    elif not data["priced"]:
        st.caption(literal(HINT_LINE))
    if unpriced_calls:
        noun = "model call has" if unpriced_calls == 1 else "model calls have"
        st.caption(md(f"{{}} {{}} no price: {UNPRICED_ADVICE}.", count(unpriced_calls), noun))
    unmatched = unmatched_line(data.get("unmatched") or [])
    if unmatched:
        st.caption(literal(unmatched + "."))


def draw_spend_panel() -> None:
    """The Overview's "Model spend": the last `SPEND_DAYS` days per agent, and the total (a
    caption, not an empty state, when there is none: the page's one empty state is its own)."""
    st.subheader("Model spend")
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    data = loaders.fleet_spend(today - timedelta(days=SPEND_DAYS - 1))
    days: pd.DataFrame = data["days"]
    _prices_notice(data, int(days["unpriced_calls"].sum()) if not days.empty else 0)
    if days.empty:
        st.caption(md("No model calls recorded in the last {} days.", SPEND_DAYS))
        return
    calls = int(days["model_calls"].sum())
    spent = days["cost_usd"].dropna()
    total = dollars(float(spent.sum())) if data["priced"] and not spent.empty else None
    unpriced = int(days["unpriced_calls"].sum())
    if total is not None and unpriced:
        total += f" for the {calls - unpriced:,} priced"
    tokens = int(days["input_tokens"].sum() + days["output_tokens"].sum())
    st.caption(
        md(
            "Last {} days (UTC), every thread whatever the filters above, per agent: "
            "{} model calls, {} tokens{}.",
            SPEND_DAYS,
            count(calls),
            count(tokens),
            f", {total}" if total else "",
        )
    )
    st.altair_chart(spend_chart(days, priced=total is not None), width="stretch")


def draw_thread_cost(thread_id: str) -> None:
    """One caption: the thread's recorded calls and their cost (or tokens and the hint), and
    what its compressions saved; the savings per compression in an expander."""
    data = loaders.thread_cost(thread_id)
    item = data["spend"]
    _prices_notice(data, int(item["unpriced_calls"]) if item is not None else 0)
    if item is None:
        st.caption("Model cost: no model call recorded for this thread.")
    else:
        cost = f"{dollars(item['cost_usd'])} · " if item["cost_usd"] is not None else ""
        st.caption(
            md(
                "Model cost: {}{} model calls · {} input and {} output tokens",
                cost,
                count(item["model_calls"]),
                count(item["input_tokens"]),
                count(item["output_tokens"]),
            )
        )
    savings = data["savings"]
    if not savings:
        return
    avoided = sum(s["tokens_avoided"] for s in savings)
    saved = [s["saved_usd"] for s in savings if s["saved_usd"] is not None]
    with st.expander(
        md(
            "Compressions saved {} input tokens{}",
            count(avoided),
            f" ({dollars(sum(saved))})" if saved else "",
        )
    ):
        st.dataframe(
            pd.DataFrame(
                {
                    "at": [stamp(s["at"]) for s in savings],
                    "trigger": [s["trigger"] for s in savings],
                    "saved per call": [count(s["tokens_saved_per_call"]) for s in savings],
                    "calls after": [count(s["model_calls_after"]) for s in savings],
                    "tokens avoided": [count(s["tokens_avoided"]) for s in savings],
                    "saved": [dollars(s["saved_usd"]) for s in savings],
                }
            ),
            hide_index=True,
            width="stretch",
        )
        st.caption(
            "Each compression's tokens saved per call (before − after) times the model calls "
            "recorded from it until the next compression, priced as input."
        )
