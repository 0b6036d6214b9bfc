"""The compress action in the UI: ask, confirm with a preview, run through the service, report.

Flow: a button's callback stores the threads the operator picked (with the
checkpoint each row showed) under `PENDING_KEY`; while something is pending the
page opens `confirm_dialog`, which shows `sources.preview_compression` for
each thread and, on confirm, compresses them through the one seam
(`sources.compress_each`: our own threads one at a time, an attached
platform's at most 3 calls at once) with the checkpoint the operator saw in
that preview (a state that moved since is refused as stale). Every outcome or
refusal becomes one line under `RESULTS_KEY`; a completed one also says what its
compression record kept (`evidence_of`: cited evidence kept in view "n of m",
recoverable, lost), shown as a caption under its line. The cached loaders are
cleared, and the app reruns. Before the click, the preview says how many of the items the
assistant cited the summary will keep in view (the engine's estimate of its ledger).
The service checks the role again: the disabled button is a courtesy only.
"""

from __future__ import annotations

import logging
from typing import Any

import pandas as pd
import streamlit as st

from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.outside_text import escaped_controls
from yuxi_dash.sources import Outcome, compress_each, preview_compression
from yuxi_dash.ui.compressions import loaders as compression_loaders
from yuxi_dash.ui.compressions.ledger_view import evidence_line
from yuxi_dash.ui.loaders import clear_loaders
from yuxi_dash.ui.page_text import error_line, literal, md, outcome_line, short_id, tokens

log = logging.getLogger(__name__)

PENDING_KEY = "compress_pending"
RESULTS_KEY = "compress_results"
PREVIEW_KEY = "compress_preview"


def request_compression(items: list[dict[str, Any]]) -> None:
    """Button callback: remember what to confirm ([{thread_id, checkpoint_id}, ...])."""
    st.session_state.pop(PREVIEW_KEY, None)
    st.session_state[PENDING_KEY] = [
        {"thread_id": str(i["thread_id"]), "checkpoint_id": i.get("checkpoint_id")} for i in items
    ]


def _dismiss() -> None:
    st.session_state.pop(PENDING_KEY, None)
    st.session_state.pop(PREVIEW_KEY, None)


def outcome_kind_line(outcome: Outcome) -> tuple[str, str]:
    """(kind, one line) of one thread's outcome; kind "completed", "no_op" or "refused".

    The line may quote a platform (its message, path or reason): control characters are
    escaped here, and every caller shows it with `literal` (no Markdown, no HTML).
    """
    if outcome.result is not None:
        line = outcome_line(outcome.thread_id, outcome.result.to_dict())
        return outcome.result.status, escaped_controls(line)
    error = outcome.error or RuntimeError("no outcome")
    if not isinstance(error, YuxiDashError):  # shown as one line; details go to the log
        log.error("compress failed unexpectedly (%s)", type(error).__name__)
    return "refused", escaped_controls(error_line(error, thread_id=outcome.thread_id))


def evidence_of(outcome: Outcome) -> str | None:
    """What the compression record of a completed outcome kept, in one line; None when the
    outcome wrote none, or its record is not there (yet: an attached platform's shows up
    with the next scan)."""
    result = outcome.result
    if result is None or result.status != "completed":
        return None
    try:
        record = compression_loaders.record_at(outcome.thread_id, result.checkpoint_id)
    except Exception as exc:  # noqa: BLE001 - a figure under the line; the outcome still shows
        log.warning("compression record of %s not read (%s)", outcome.thread_id, type(exc).__name__)
        return None
    if record is None:
        return "Evidence: no compression record yet."
    return evidence_line(record["ledger"])


def _preview_rows(pending: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for item in pending:
        thread_id = item["thread_id"]
        try:
            preview = preview_compression(thread_id)
        except YuxiDashError as exc:
            rows.append(
                {
                    "thread_id": thread_id,
                    "checkpoint_id": item["checkpoint_id"],
                    "note": error_line(exc),
                }
            )
            continue
        note = preview.reason or (f"busy ({preview.busy_reason})" if preview.busy_reason else "")
        if preview.reason == "compression_unsupported":  # an unknown agent keeps agent_not_found
            note = "agent does not support context compression"
        if preview.reason == "insufficient_history" and preview.note:
            note = preview.note  # why, and whether one large tool result fills the kept part
        listed = item["checkpoint_id"]  # None: listed before a checkpoint was projected
        if listed is not None and preview.checkpoint_id != listed:
            changed = "changed since the list was loaded"
            note = f"{note}; {changed}" if note else changed
        rows.append(
            {
                "thread_id": thread_id,
                "checkpoint_id": preview.checkpoint_id,
                "messages to summarize": preview.messages_to_summarize,
                "tokens before (est.)": tokens(preview.estimated_before_tokens),
                "tokens after (est.)": tokens(preview.estimated_after_tokens),
                "cited kept in view": (
                    f"{preview.cited_in_view:,} of {preview.cited_total:,}"
                    if preview.cited_total
                    else "none cited"
                ),
                "note": note,
            }
        )
    return rows


PREVIEW_HEADERS = {  # the preview rows' fields as the dialog's table names them
    "thread_id": "Thread",
    "checkpoint_id": "Checkpoint",
    "messages to summarize": "Messages to summarize",
    "tokens before (est.)": "Tokens before",  # the dashboard's own count (thread detail's caption names it)
    "tokens after (est.)": "Tokens after (est.)",
    "cited kept in view": "Cited kept in view",  # the rest is listed in the evidence index
    "note": "Note",
}


def _literal_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The preview rows for st.table, whose every cell is Markdown: ids and notes shown as written.

    Columns get the names used on the pages, and a column empty in every row is left out.
    """
    shown = [{**row, "checkpoint_id": short_id(row.get("checkpoint_id"))} for row in rows]
    frame = pd.DataFrame(
        [
            {header: literal(row.get(key)) for key, header in PREVIEW_HEADERS.items()}
            for row in shown
        ]
    )
    empty = [column for column in frame.columns if all(v == "" for v in frame[column])]
    return frame.drop(columns=empty).set_index("Thread")


@st.dialog("Compress context", width="large", on_dismiss=_dismiss)
def confirm_dialog(actor: Actor) -> None:
    """Preview, then compress the pending threads one by one."""
    pending: list[dict[str, Any]] = st.session_state.get(PENDING_KEY) or []
    if not pending:
        st.write("Nothing selected.")
        return
    rows = st.session_state.get(PREVIEW_KEY)
    if rows is None or [r["thread_id"] for r in rows] != [i["thread_id"] for i in pending]:
        # previewed once per request: confirming uses the checkpoints shown here, not newer ones
        rows = _preview_rows(pending)
        st.session_state[PREVIEW_KEY] = rows
    st.write(
        "The history before the kept recent messages is summarized into one message; "
        "the full history is appended to the thread's conversation-history file."
    )
    st.table(_literal_table(rows))
    left, right = st.columns(2)
    confirmed = left.button(
        md("Compress {} thread{}", len(rows), "s" if len(rows) != 1 else ""),
        type="primary",
        key="confirm_compress",
        width="stretch",
    )
    if right.button("Cancel", key="cancel_compress", width="stretch"):
        _dismiss()
        st.rerun()
    if not confirmed:
        return
    label = rows[0]["thread_id"] if len(rows) == 1 else f"{len(rows)} threads"
    with st.status(md("Compressing {}…", label), expanded=True) as status:
        progress = st.progress(0.0, text=md("0 of {} done", len(rows)))
        finished: list[str] = []

        evidence: dict[str, str | None] = {}

        def show(outcome: Outcome) -> None:  # called in this script thread as each one ends
            finished.append(outcome.thread_id)
            st.write(literal(outcome_kind_line(outcome)[1]))
            evidence[outcome.thread_id] = evidence_of(outcome)
            if evidence[outcome.thread_id]:
                st.caption(literal(evidence[outcome.thread_id]))
            count = len(finished)
            progress.progress(count / len(rows), text=md("{} of {} done", count, len(rows)))

        outcomes = compress_each(
            [(row["thread_id"], row.get("checkpoint_id")) for row in rows],
            actor=actor,
            on_done=show,
        )
        results: list[dict[str, Any]] = []
        for outcome in outcomes:  # in the order shown in the preview
            kind, line = outcome_kind_line(outcome)
            results.append(
                {
                    "thread_id": outcome.thread_id,
                    "kind": kind,
                    "line": line,
                    "evidence": evidence.get(outcome.thread_id),
                }
            )
        done = sum(r["kind"] == "completed" for r in results)
        status.update(
            label=md("Done: {} of {} compressed", done, len(results)),
            state="complete" if done == len(results) else "error",
        )
    st.session_state[RESULTS_KEY] = results
    _dismiss()
    clear_loaders()
    compression_loaders.clear()
    st.rerun()


def show_results() -> None:
    """The latest outcomes, one line per thread (and what a compression kept, under it)."""
    show = {"completed": st.success, "no_op": st.info, "refused": st.error}
    for result in st.session_state.get(RESULTS_KEY) or []:
        show.get(result["kind"], st.error)(literal(result["line"]))
        if result.get("evidence"):
            st.caption(literal(result["evidence"]))


def maybe_open_dialog(actor: Actor) -> None:
    """Open the confirm dialog while a compression is pending (call once, at the page's end)."""
    if st.session_state.get(PENDING_KEY):
        confirm_dialog(actor)
