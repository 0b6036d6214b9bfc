"""Text an outside server wrote (a platform's error message, a header) made safe to show.

A platform's words end up in our messages, and so in a terminal, a page, a log line and
the audit. `safe_line(text, secrets=...)` is what every such string goes through first:
- `redacted`: each secret we hold (`secrets_of(settings)`: the platform token, from
  the setting or its file, the alert webhook secret, ...) and any ``Bearer <...>`` or
  ``Authorization: ...`` value becomes ``[redacted]``, before anything is cut.
- `escaped_controls`: every control character (C0 with tab and newline, DEL, C1, the
  bidirectional overrides, a lone surrogate) is written out visibly, ``\\x1b`` as those
  four characters and a newline as ``\\n``, so an ESC sequence is inert text.
Then the line is cut to its limit. The CLI escapes every error message it prints too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import SecretStr

from yuxi_dash.settings import Settings

REDACTED = "[redacted]"
LINE_LIMIT = 300
MIN_SECRET_CHARS = 4  # shorter "secrets" cannot be told from ordinary words

_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\ud800-\udfff" + "".join(sorted(_BIDI)) + "]",
)
# a credential's value ends at a blank, a quote or JSON punctuation
_VALUE = r"[^\s\"',;{}\[\]]+"
_AUTHORIZATION = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"((?:bearer|basic|token|digest)\s+)?" + _VALUE
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?!\[redacted\])" + _VALUE)


def escaped_controls(text: str) -> str:
    """``text`` with every control character written out (``\\x1b``, ``\\n``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def redacted(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each secret, and any bearer or Authorization value, as ``[redacted]``."""
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_CHARS}, key=len)[::-1]:
        text = text.replace(secret, REDACTED)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}{REDACTED}", text)
    return _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)


def safe_line(text: object, *, secrets: Iterable[str] = (), limit: int = LINE_LIMIT) -> str:
    """Outside text as one line we can show, log or audit: redacted, escaped, then cut."""
    line = escaped_controls(redacted(str(text), secrets))
    return line if len(line) <= limit else line[: max(0, limit - 1)] + "…"


def secrets_of(settings: Settings) -> tuple[str, ...]:
    """Every secret the settings hold that an outside server could echo back at us."""
    found: list[str] = []
    for value in (
        settings.platform_token,
        settings.alert_webhook_secret,
        settings.summarizer_api_key,
        settings.proxy_secret,
    ):
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if text and text.strip():
            found.append(text.strip())
    path = settings.platform_token_file
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            token = ""  # the client says why it cannot read it
        if token:
            found.append(token)
    return tuple(found)
