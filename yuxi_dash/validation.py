"""The input rules: what a well-formed id, text, integer or JSON document is, in one place.

Every service entry point and CLI handler calls these before it touches a store,
inside the block that audits its refusals: bad input is one `InvalidInput`
(``invalid_input``, exit 2), audited, nothing changed, never a driver error.

- identifiers (thread ids, user ids, agent slugs): 1 to 128 characters, not
  only whitespace, no control character, no lone surrogate;
- text: no NUL, no lone surrogate, optionally capped;
- integers: real ints, never bools, within a signed 64-bit column; an agent's
  sizes within `AGENT_INT_RANGES`;
- JSON documents: at most `MAX_JSON_DEPTH` levels (walked iteratively), string
  keys, strings under the text rule, integers within signed 64 bits.

Messages name the field and the rule, never the value: the value may be hostile.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from yuxi_dash.errors import InvalidInput

MAX_IDENTIFIER_LENGTH = 128  # conversations.thread_id / user_id, agents.slug: VARCHAR(128)
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
CONTEXT_WINDOW_RANGE = (1, 10_000_000)
# Agent sizes, each within its 32-bit column; summary_threshold is in K tokens (x 1024).
AGENT_INT_RANGES: dict[str, tuple[int, int]] = {
    "context_window": CONTEXT_WINDOW_RANGE,
    "summary_threshold": (1, 10_000),
    "summary_keep_messages": (1, 100_000),
    "summary_tool_result_token_limit": (1, 10_000_000),
}
MAX_JSON_DEPTH = 64
# Unicode category Cs (lone surrogates) and Cc (control characters), as ranges
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _bad_characters(value: str, *, controls: bool) -> str | None:
    """Why `value` cannot be stored as it is (None when it can)."""
    if "\x00" in value:
        return "must not contain a NUL byte"
    if _SURROGATE.search(value):
        return "must be valid Unicode (no lone surrogates)"
    if controls and _CONTROL.search(value):
        return "must not contain control characters"
    return None


def identifier(value: Any, name: str = "thread id") -> str:
    """A thread id, user id or agent slug: 1..128 characters, no control characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    if not value.strip():
        raise InvalidInput(f"{name} must not be empty")
    if len(value) > MAX_IDENTIFIER_LENGTH:
        raise InvalidInput(f"{name} is longer than {MAX_IDENTIFIER_LENGTH} characters")
    problem = _bad_characters(value, controls=True)
    if problem:
        raise InvalidInput(f"{name} {problem}")
    return value


def thread_id(value: Any) -> str:
    """A thread id (see `identifier`)."""
    return identifier(value, "thread id")


def optional_identifier(value: Any, name: str) -> str | None:
    """None stays None (no filter); anything else must be an identifier (so "" is refused)."""
    return None if value is None else identifier(value, name)


def text(value: Any, name: str, *, limit: int | None = None, required: bool = False) -> str:
    """Free text: a string with no NUL and no lone surrogate, at most `limit` characters."""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    if required and not value.strip():
        raise InvalidInput(f"{name} must not be empty")
    if limit is not None and len(value) > limit:
        raise InvalidInput(f"{name} is longer than {limit} characters")
    problem = _bad_characters(value, controls=False)
    if problem:
        raise InvalidInput(f"{name} {problem}")
    return value


def integer(value: Any, name: str, *, minimum: int = INT64_MIN, maximum: int = INT64_MAX) -> int:
    """An int (not a bool) within [minimum, maximum]; the default range is a signed 64-bit column."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer")
    if not minimum <= value <= maximum:
        raise InvalidInput(f"{name} must be between {minimum:,} and {maximum:,}")
    return value


def db_id(value: Any, name: str = "id") -> int:
    """A row id: an int that fits the signed 64-bit id columns."""
    return integer(value, name)


def non_negative(value: Any, name: str, *, maximum: int = INT64_MAX) -> int:
    return integer(value, name, minimum=0, maximum=maximum)


def context_window(value: Any) -> int:
    low, high = CONTEXT_WINDOW_RANGE
    return integer(value, "context_window", minimum=low, maximum=high)


def agent_int(key: str, value: Any, *, prefix: str = "") -> int:
    """One of the agent's sizes (context_window, summary_threshold, ...) within its range."""
    low, high = AGENT_INT_RANGES[key]
    return integer(value, f"{prefix}{key}", minimum=low, maximum=high)


def number(value: Any, name: str, *, minimum: float, maximum: float) -> float:
    """A finite number (int or float, not a bool) within [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"{name} must be a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"{name} must be a finite number")
    if not minimum <= value <= maximum:
        raise InvalidInput(f"{name} must be between {minimum} and {maximum}")
    return float(value)


_Path = tuple[Any, str | int] | None  # (parent path, key or index), built as the walk goes
_PATH_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _where(path: _Path) -> str:
    """Where in a document a value is: ``agent.context_window``, ``messages[0].data``.

    A key that is not a plain name is shown as ``?`` (a key is outside input too).
    """
    parts: list[str] = []
    while path is not None:
        path, key = path
        if isinstance(key, int):
            parts.append(f"[{key}]")
        else:
            parts.append("." + (key if _PATH_KEY.fullmatch(key) else "?"))
    return "".join(reversed(parts)).lstrip(".") or "the top level"


def json_document(value: Any, name: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON-shaped value: at most `max_depth` levels, string keys, storable strings.

    Lists, tuples and dicts are containers; str, int (signed 64 bits), float
    (finite), bool and None are leaves; anything else is refused. Iterative:
    no recursion.
    """
    stack: list[tuple[Any, int, _Path]] = [(value, 1, None)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, Mapping) or isinstance(item, list | tuple):
            if depth > max_depth:
                raise InvalidInput(f"{name} is nested deeper than {max_depth} levels")
            if isinstance(item, Mapping):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InvalidInput(f"{name} has a key that is not a string")
                    text(key, f"a key in {name}")
                    stack.append((child, depth + 1, (path, key)))
            else:
                stack.extend((child, depth + 1, (path, i)) for i, child in enumerate(item))
        elif isinstance(item, str):
            text(item, f"a string in {name}")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"{name} holds a number that is not finite")
        elif isinstance(item, int) and not isinstance(item, bool):
            if not INT64_MIN <= item <= INT64_MAX:
                raise InvalidInput(f"{name} holds an integer past 64 bits at {_where(path)}")
        elif item is not None and not isinstance(item, bool):
            raise InvalidInput(f"{name} holds a value that is not JSON")
    return value
