"""How a number, a moment or a LaunchDarkly reason reads, on the dashboard and on the CLI.

One formatter per kind of value, so one thread's pressure reads the same on every page and
in every command. Pure functions, no Streamlit; `yuxi_dash.ui.page_text` re-exports them.

- A ratio is a percentage with one decimal, rounded half up: 1.6225 -> "162.3%". Python
  rounds a float's halves to even and the browser rounds them up, so the pages hand the
  browser `percent_value` numbers that are already rounded, or finished text.
- A count has thousands separators: 28045 -> "28,045". An id never has them: 1595 -> "1595".
- A moment reads one way everywhere: to the second, in UTC: "2026-11-19 15:40:07 UTC".
- A LaunchDarkly evaluation reason is shown in words:
  "TARGET_MATCH" -> "the user is targeted individually".
- A thread an attached platform owns reads "attached: <platform label>" everywhere
  (`attached_label`); a tool-result check reads "content changed" or "file not on this
  volume" (`check_label`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

PERCENT_DECIMALS = 1
MISSING = "–"  # what a page shows for no value (the CLI passes "-")
PERCENT_FORMAT = f"%.{PERCENT_DECIMALS}f%%"  # printf format for a `percent_value` column


def absent(value: object) -> bool:
    """No value: None, empty text, or a NaN / NaT (how pandas writes a missing number or moment)."""
    if value is None or (isinstance(value, str) and not value):
        return True
    try:
        return bool(value != value)  # NaN and NaT are the only values unequal to themselves
    except TypeError:  # pandas' NA is neither equal nor unequal to itself
        return True
    except ValueError:  # an array: a value, not an absence
        return False


def percent_value(ratio: float | None) -> float | None:
    """``ratio`` as a percentage rounded half up to one decimal: 1.6225 -> 162.3."""
    if ratio is None or absent(ratio) or (isinstance(ratio, float) and not math.isfinite(ratio)):
        return None
    try:
        exact = Decimal(repr(float(ratio))) * 100
    except (InvalidOperation, ValueError, TypeError):
        return None
    return float(exact.quantize(Decimal(1).scaleb(-PERCENT_DECIMALS), rounding=ROUND_HALF_UP))


def pct(ratio: float | None, *, missing: str = MISSING) -> str:
    """0.8734 -> "87.3%"; 1.6225 -> "162.3%"; None -> ``missing``."""
    value = percent_value(ratio)
    return missing if value is None else f"{value:.{PERCENT_DECIMALS}f}%"


def count(value: float | None, *, missing: str = MISSING) -> str:
    """A count of tokens, characters, facts or threads: 102400 -> "102,400"."""
    if value is None or absent(value) or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return f"{int(value):,}"


def decimal(value: float | None, *, places: int = 1, missing: str = MISSING) -> str:
    """A measured quantity (an age in days, say): 109.6 -> "109.6"; 1234.5 -> "1,234.5"."""
    if value is None or absent(value) or (isinstance(value, float) and not math.isfinite(value)):
        return missing
    return f"{float(value):,.{places}f}"


def attached_label(platform: str | None) -> str:
    """What an attached platform's thread is called on every page and in the CLI.

    ``platform`` is the platform's secret-free label (host:port/database, the scan's source):
    "attached: db.internal:5432/agents"; unknown: "attached: platform".
    """
    return f"attached: {platform or 'platform'}"


CHECK_LABELS = {"ok": "ok", "mismatch": "content changed", "missing": "file not on this volume"}


def check_label(status: str) -> str:
    """A tool-result check in words: ok, "content changed" (its SHA-256 differs) or
    "file not on this volume" (no such file, or the workdir is not mounted here)."""
    return CHECK_LABELS.get(status, status)


def ident(value: object, *, missing: str = MISSING) -> str:
    """An id or a version number exactly as stored, never with separators: 1595 -> "1595"."""
    return missing if value is None else str(value)


STAMP_FORMAT = "%Y-%m-%d %H:%M:%S UTC"  # the one way a moment reads: "2026-12-06 14:03:07 UTC"
_ISO_MOMENT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d")  # text that starts like an ISO moment


def stamp(moment: datetime | date | str | None, *, missing: str = MISSING) -> str:
    """A moment in UTC, to the second: "2026-11-19 15:40:07 UTC" (`STAMP_FORMAT`).

    ISO text (with or without an offset) is read as a moment; text that is no moment is
    returned as it is. A moment without a zone is taken to be UTC, as the store writes them.
    """
    if moment is None or absent(moment):
        return missing
    if isinstance(moment, str):
        text = moment
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return text
    if not isinstance(moment, datetime):
        moment = datetime(moment.year, moment.month, moment.day, tzinfo=UTC)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime(STAMP_FORMAT)


def plain(value: object, *, missing: str = MISSING) -> str:
    """Any value a record holds as a person reads it, never a Python repr.

    A list is joined with commas, a mapping reads ``key value, ...``, a float has one
    decimal, an int has separators, a bool is yes/no, a moment goes through `stamp`.
    """
    if absent(value):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return count(value, missing=missing)
    if isinstance(value, float):
        return decimal(value, missing=missing)
    if isinstance(value, datetime | date):
        return stamp(value, missing=missing)
    if isinstance(value, Mapping):
        return ", ".join(f"{key} {plain(item, missing=missing)}" for key, item in value.items())
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return ", ".join(plain(item, missing=missing) for item in value)
    return str(value)


def recorded(value: object, *, missing: str = MISSING) -> str:
    """A value exactly as a record holds it, readably: numbers as recorded (0.7823 stays
    0.7823, an int has no separators: it is mostly an id), an ISO moment through `stamp`,
    a list joined with commas, a bool yes/no."""
    if absent(value):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return stamp(value, missing=missing) if _ISO_MOMENT.match(value) else value
    if isinstance(value, Sequence) and not isinstance(value, bytes):
        return ", ".join(recorded(item, missing=missing) for item in value)
    return plain(value, missing=missing)


def detail_text(detail: Mapping[str, object] | None, *, missing: str = MISSING) -> str:
    """A record's detail mapping as one readable line: ``key: value · key: value``.

    Nested mappings flatten to dotted keys (``before.tokens: 12474``); every value reads
    as `recorded` (never rounded); nothing is cut short.
    """
    parts: list[str] = []

    def walk(prefix: str, value: object) -> None:
        if isinstance(value, Mapping) and value:
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        else:
            parts.append(f"{prefix}: {recorded(value, missing=missing)}")

    for key, item in (detail or {}).items():
        walk(str(key), item)
    return " · ".join(parts) if parts else missing


# --- LaunchDarkly evaluation reasons ---------------------------------------------------------
# `yuxi_dash.flags` keeps LaunchDarkly's reason code (what JSON output and the audit log
# carry: "RULE_MATCH (rule 0)", "ERROR (FLAG_NOT_FOUND)"); people read these words instead.

_REASON_WORDS = {
    "OFF": "the flag is switched off",
    "FALLTHROUGH": "no target or rule matched: the flag's default",
    "TARGET_MATCH": "the user is targeted individually",
    "RULE_MATCH": "a targeting rule matched",
    "PREREQUISITE_FAILED": "a prerequisite flag is not met",
    "ERROR": "LaunchDarkly could not evaluate the flag",
    "not configured": "LaunchDarkly is not configured",
    "unknown": "LaunchDarkly gave no reason",
}
_ERROR_WORDS = {
    "CLIENT_NOT_READY": "the client was not ready",
    "FLAG_NOT_FOUND": "no such flag",
    "MALFORMED_FLAG": "the flag is malformed",
    "USER_NOT_SPECIFIED": "no user was given",
    "WRONG_TYPE": "the flag is not a boolean",
    "EXCEPTION": "the evaluation failed",
}


def reason_text(reason: str | None) -> str:
    """A LaunchDarkly reason code (as `yuxi_dash.flags.describe_reason` writes it) in words.

    "FALLTHROUGH" -> "no target or rule matched: the flag's default";
    "RULE_MATCH (rule 0)" -> "targeting rule 1 matched";
    "PREREQUISITE_FAILED (beta)" -> "prerequisite flag beta is not met";
    "ERROR (FLAG_NOT_FOUND)" -> "LaunchDarkly could not evaluate the flag: no such flag".
    """
    text = (reason or "unknown").strip()
    kind, _, rest = text.partition(" (")
    detail = rest[:-1] if rest.endswith(")") else rest
    if kind == "RULE_MATCH" and detail.startswith("rule "):
        index = detail.removeprefix("rule ")
        return (
            f"targeting rule {int(index) + 1} matched" if index.isdigit() else _REASON_WORDS[kind]
        )
    if kind == "PREREQUISITE_FAILED" and detail and detail != "?":
        return f"prerequisite flag {detail} is not met"
    if kind == "ERROR" and detail:
        return (
            f"{_REASON_WORDS[kind]}: {_ERROR_WORDS.get(detail, detail.lower().replace('_', ' '))}"
        )
    if text in _REASON_WORDS:
        return _REASON_WORDS[text]
    return _REASON_WORDS.get(kind, text.lower().replace("_", " "))
