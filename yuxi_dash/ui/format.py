"""Plain-text formatting for the dashboard: ratios, tokens, ages, and one-line outcomes.

Pure functions (no Streamlit), so pages stay thin and the wording is tested
once: the operator sees every outcome or refusal as exactly one line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from yuxi_dash.auth import Actor, Role
from yuxi_dash.errors import YuxiDashError

_REFUSAL_PREFIX = {
    "thread_busy": "Busy",
    "stale_state": "Stale",
    "compression_unsupported": "Unsupported",
    "thread_not_found": "Not found",
    "agent_not_found": "Not found",
    "forbidden": "Not allowed",
    "workdir_unavailable": "Workdir unavailable",
    "summarizer_failed": "Summarizer failed",
    "path_refused": "Refused",
}


def pct(ratio: float | None) -> str:
    """0.8734 -> '87.3%'; None -> '–'."""
    if ratio is None:
        return "–"
    return f"{ratio * 100:.1f}%"


def tokens(count: int | None) -> str:
    """102400 -> '102,400'."""
    if count is None:
        return "–"
    return f"{int(count):,}"


def tokens_to_threshold(next_llm_input_tokens: int, summary_trigger_tokens: int) -> int:
    """How many tokens the next call may add before the summary threshold (negative: over)."""
    return int(summary_trigger_tokens) - int(next_llm_input_tokens)


def _text_or_none(value: object) -> str | None:
    """A non-empty string, else None (DataFrames turn None into NaN)."""
    return value if isinstance(value, str) and value else None


def busy_label(reason: str | None) -> str:
    return _text_or_none(reason) or "idle"


def ago(moment: datetime | None, *, now: datetime | None = None) -> str:
    """A short relative age: 'just now', '5 min ago', '3 h ago', '2 d ago', or 'never'."""
    if moment is None:
        return "never"
    now = now or datetime.now(UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} d ago"


def stamp(moment: datetime | str | None) -> str:
    """A moment to the minute in UTC: '2026-11-19 15:40 UTC'; text that is no date as it is."""
    if moment is None:
        return "–"
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return moment
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


_MARKDOWN_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def markdown_literal(text: str) -> str:
    """``text`` escaped so Streamlit's markdown shows it as written: no links, images, HTML or math.

    Users' own words are shown to support staff; a message holding ``![](https://...)``
    must not make the staff member's browser fetch anything. Line breaks are kept.
    """
    return _MARKDOWN_SPECIALS.sub(r"\\\1", text).replace("\n", "  \n")


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis when it was longer."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def compress_blocker(row: Mapping[str, Any], actor: Actor) -> str | None:
    """Why the compress action cannot succeed for this thread row (None: it may).

    The page disables the button with this reason; the service still decides.
    """
    if actor.role < Role.OPERATOR:
        return f"needs the operator role ({actor.id} is {actor.role.label})"
    if row.get("status") == "deleted":
        return "thread is deleted"
    if not row.get("capable"):
        return f"agent {row.get('agent_slug')} does not support context compression"
    reason = _text_or_none(row.get("busy_reason"))
    if reason:
        return f"thread is busy ({reason})"
    return None


def error_line(error: BaseException, *, thread_id: str | None = None) -> str:
    """One plain line for a refusal or failure (typed errors keep their code)."""
    prefix = f"{thread_id}: " if thread_id else ""
    if isinstance(error, YuxiDashError):
        label = _REFUSAL_PREFIX.get(error.code, "Refused")
        return f"{prefix}{label} — {error.message} [{error.code}]"
    return f"{prefix}Failed — unexpected {type(error).__name__}; see the server log"


def outcome_line(thread_id: str, result: Mapping[str, Any]) -> str:
    """One line for a compression result (CompressResult.to_dict())."""
    status = result.get("status")
    before = tokens(result.get("before_tokens"))
    after = tokens(result.get("after_tokens"))
    if status == "completed":
        line = (
            f"{thread_id}: compressed {result.get('compressed_messages', 0)} messages, "
            f"{before} → {after} tokens"
        )
        if result.get("file_path"):
            line += f"; history in {result['file_path']}"
        return line
    reason = result.get("reason") or "nothing to do"
    return f"{thread_id}: nothing compressed ({reason}); {before} tokens unchanged"


def saved_result_parts(text: str) -> dict[str, Any] | None:
    """Split a saved-result message into header fields, the preview, and the truncation note.

    None when `text` is not a saved-result message.
    """
    from yuxi_dash.compression.compaction import parse_saved_header

    fields = parse_saved_header(text)
    if not fields:
        return None
    _, _, rest = text.partition("\nOutput preview:\n")
    preview, sep, note = rest.rpartition("\n[Truncated ")
    if not sep:
        preview, note = rest, ""
    else:
        note = "[Truncated " + note
    return {"fields": fields, "preview": preview, "note": note}


def structured_records(preview: str) -> dict[str, Any] | None:
    """The records of a structured query_kb / web_search preview (compact JSON), else None.

    Returns {"kind", "result_count", "omitted_results", "query", "records": [flat dicts]}.
    """
    import json

    try:
        document = json.loads(preview)
    except (ValueError, TypeError):
        return None
    if isinstance(document, list):
        document = {"results": document}
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        return None
    records = []
    for record in document["results"]:
        if not isinstance(record, dict):
            continue
        flat = {k: v for k, v in record.items() if k != "metadata"}
        metadata = record.get("metadata")
        if isinstance(metadata, dict):
            flat.update({f"metadata.{k}": v for k, v in metadata.items()})
        records.append(flat)
    return {
        "kind": document.get("kind"),
        "result_count": document.get("result_count", len(records)),
        "omitted_results": document.get("omitted_results", 0),
        "query": document.get("query"),
        "records": records,
    }
