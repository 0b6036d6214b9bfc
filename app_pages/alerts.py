"""Alerts: the firing and pending pressure alerts, recent history, channels, and (admins) rules.

Everyone sees the alerts with their measure (summary pressure, cited items lost, or
minutes until a forecast crossing), how long, a link to the thread
and a Compress button (the shared compress dialog; the service checks the
role and the thread again). A thread nobody can compress says why in its
place (`store.origin`), and is never the one picked first. Admins add,
change and delete rules here; the service refuses anyone else.
"""

from __future__ import annotations

from urllib.parse import quote

import pandas as pd
import streamlit as st

from yuxi_dash.access.roles import Role
from yuxi_dash.alerts import rules, views
from yuxi_dash.alerts.forecast_crossing import CANDIDATES_MAX, DEFAULT_HORIZON_MINUTES
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.store.models import (
    ALERT_KIND_CITED_LOST,
    ALERT_KIND_FORECAST,
    ALERT_KIND_PRESSURE,
    ALERT_KINDS,
    ALERT_SCOPES,
    ALERT_SEVERITIES,
)
from yuxi_dash.ui.compress import maybe_open_dialog, request_compression, show_results
from yuxi_dash.ui.identity import require_actor
from yuxi_dash.ui.page_text import PERCENT_FORMAT, ago, error_line, literal, md, pct, percent_value


def _threshold(kind: str, value: float | None) -> str:
    """A measure as its kind counts it: a percent, cited items lost, or minutes."""
    if kind == ALERT_KIND_CITED_LOST and value is not None:
        return f"{int(value):,} cited lost"
    if kind == ALERT_KIND_FORECAST and value is not None:
        return f"{value:,.4g} min"
    return pct(value)


actor = require_actor()
st.title("Alerts")
show_results()

for channel in views.channels():
    if channel.paused:
        st.warning(
            md(
                "The {} channel is paused after {} failed deliveries (last: {}); it retries "
                "every few minutes.",
                channel.channel,
                channel.consecutive_failures,
                channel.last_error or "unknown",
            ),
            icon=":material/pause_circle:",
        )

alerts = views.current_alerts()
st.subheader("Firing and pending")
if not alerts:
    st.info("No alert is firing or pending.")
else:
    st.dataframe(
        pd.DataFrame(
            {
                "open": [f"thread_detail?thread={quote(a.thread_id, safe='')}" for a in alerts],
                "state": [a.state for a in alerts],
                "rule": [a.rule for a in alerts],
                "severity": [a.severity for a in alerts],
                "thread": [a.thread_id for a in alerts],
                "agent": [a.agent for a in alerts],
                "platform": [a.platform for a in alerts],
                "pressure": [
                    percent_value(a.pressure) if a.kind == ALERT_KIND_PRESSURE else None
                    for a in alerts
                ],
                "measure": [_threshold(a.kind, a.pressure) for a in alerts],
                "since": [ago(a.since) for a in alerts],
            }
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "open": st.column_config.LinkColumn("", display_text="open", width=44),
            "pressure": st.column_config.ProgressColumn(
                "Summary pressure", format=PERCENT_FORMAT, min_value=0.0, max_value=100.0
            ),
        },
    )
    by_thread: dict[str, views.AlertInfo] = {}
    for alert in alerts:  # firing first, by kind, most urgent first: a thread's first alert
        by_thread.setdefault(alert.thread_id, alert)
    ids = list(by_thread)
    chosen = st.selectbox(
        "Compress a thread",
        ids,
        index=next((i for i, t in enumerate(ids) if not by_thread[t].compress_blocker), 0),
        format_func=lambda t: (
            f"{t} · {_threshold(by_thread[t].kind, by_thread[t].pressure)}"
            + (" · cannot be compressed" if by_thread[t].compress_blocker else "")
        ),
        key="alerts_compress_thread",
        help="It starts on the highest thread that can be compressed.",
    )
    blocker = by_thread[chosen].compress_blocker if chosen else None
    viewer = actor.role < Role.OPERATOR
    st.button(
        "Compress…",
        type="primary",
        key="alerts_compress",
        disabled=viewer or blocker is not None or chosen is None,
        help=literal(blocker) if blocker else "needs the operator role" if viewer else None,
        on_click=request_compression,
        args=([{"thread_id": chosen, "checkpoint_id": by_thread[chosen].checkpoint_id}],),
    )
    if blocker:  # the reason, never an estimate: the dialog does not open
        st.caption(md("Cannot compress {}: {}.", chosen, blocker))

st.subheader("Recent history")
past = views.history()
if past:
    st.dataframe(
        pd.DataFrame(
            {
                "when": [ago(h.at) for h in past],
                "thread": [h.thread for h in past],
                "became": [h.outcome for h in past],
                "rule": [h.rule for h in past],
                "measure": [_threshold(h.kind, h.pressure) for h in past],
            }
        ),
        hide_index=True,
        width="stretch",
    )
else:
    st.caption("No alert has changed state yet.")


st.subheader("Rules")
current_rules = rules.list_rules()
capped = views.capped_forecast_rules()
if capped:
    st.caption(
        md(
            "Forecast rules at the cap (more threads active within the horizon than a pass "
            "forecasts: only the {} most pressured are read): {}.",
            f"{CANDIDATES_MAX:,}",
            ", ".join(capped),
        )
    )
st.dataframe(
    pd.DataFrame(
        {
            "rule": [r.name for r in current_rules],
            "kind": [r.kind for r in current_rules],
            "scope": [f"{r.scope} {r.agent}" if r.agent else r.scope for r in current_rules],
            "fire at": [_threshold(r.kind, r.fire_at) for r in current_rules],
            "clears": [  # a forecast's minutes resolve beyond clear_at, the others below it
                f"{'beyond' if r.kind == ALERT_KIND_FORECAST else 'below'} "
                f"{_threshold(r.kind, r.clear_at)}"
                for r in current_rules
            ],
            "for (s)": [r.for_seconds for r in current_rules],
            "severity": [r.severity for r in current_rules],
            "enabled": [r.enabled for r in current_rules],
            "compressible only": [r.compressible_only for r in current_rules],
        }
    ),
    hide_index=True,
    width="stretch",
)
if actor.role >= Role.ADMIN:
    with st.form("alert_rule_form"):
        st.caption("Add a rule, or change the rule of that name.")
        name = st.text_input("Name", key="rule_name")
        left, middle, right = st.columns(3)
        fire_at = left.number_input("Fire at (ratio)", value=0.85, step=0.01, key="rule_fire")
        clear_at = middle.number_input("Clear below", value=0.80, step=0.01, key="rule_clear")
        for_seconds = right.number_input("For (seconds)", value=0, min_value=0, key="rule_for")
        scope = left.selectbox("Scope", ALERT_SCOPES, key="rule_scope")
        agent = middle.text_input("Agent (scope agent)", key="rule_agent")
        severity = right.selectbox("Severity", ALERT_SEVERITIES, index=1, key="rule_severity")
        kind = left.selectbox(
            "Kind",
            ALERT_KINDS,
            key="rule_kind",
            help="pressure: a thread's summary pressure ratio (fire at / clear below). "
            "cited_evidence_lost: the newest compression lost an item the assistant cited "
            "(fires at 1, the ratios above are not used). forecast_crossing: a thread is "
            "forecast to reach 100% within the horizon (resolves beyond it, or when compressed).",
        )
        horizon = middle.number_input(
            "Horizon (minutes)",
            value=None,
            min_value=1,
            max_value=1440,
            key="rule_horizon",
            placeholder=f"the rule's own (new: {DEFAULT_HORIZON_MINUTES:g})",
            help="forecast_crossing only: fires for a thread forecast to reach 100% of its "
            "summary threshold within this many minutes. Empty: an existing rule keeps its "
            "own; a new rule gets the default.",
        )
        enabled = st.checkbox("Enabled", value=True, key="rule_enabled")
        compressible_only = st.checkbox(
            "Only threads that can be compressed",
            value=True,
            key="rule_compressible",
            help="Leave out threads whose agent cannot be compressed, or that the platform "
            "refused: nobody could act on their alerts.",
        )
        if st.form_submit_button("Save rule"):
            fields = {
                "fire_at": float(fire_at),
                "clear_at": float(clear_at),
                "for_seconds": int(for_seconds),
                "scope": scope,
                "agent": agent or None,
                "severity": severity,
                "enabled": enabled,
                "compressible_only": compressible_only,
            }
            existing = next((r for r in current_rules if r.name == name), None)
            rule_kind = existing.kind if existing else kind
            if rule_kind == ALERT_KIND_FORECAST:  # minutes: fires within, resolves beyond (a
                # clear_at equal to the horizon moves with it: `rules.update_rule`)
                fields.update(fire_at=None if horizon is None else float(horizon), clear_at=None)
            elif rule_kind != ALERT_KIND_PRESSURE:  # a count, with the kind's own defaults
                fields.update(fire_at=None, clear_at=None)
            try:
                if existing is not None:
                    rules.update_rule(actor, name, **fields)
                else:
                    rules.add_rule(actor, name=name, kind=kind, **fields)  # type: ignore[arg-type]
                st.success(md("Saved rule {}.", name))
            except YuxiDashError as exc:
                st.error(literal(error_line(exc)))
    if current_rules:
        doomed = st.selectbox("Delete a rule", [r.name for r in current_rules], key="rule_delete")
        if st.button("Delete rule", key="rule_delete_button"):
            try:
                rules.delete_rule(actor, doomed)
                st.success(
                    md("Deleted rule {}; its alerts resolve at the next evaluation.", doomed)
                )
            except YuxiDashError as exc:
                st.error(literal(error_line(exc)))

maybe_open_dialog(actor)
