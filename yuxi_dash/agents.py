"""The defaults of an agent's compression settings: one place for every module that needs them.

An agent row (`store.models.Agent`), an imported agent with fields left out, a
compress preview of a thread whose agent row is gone, and the engine's keyword
defaults all take their numbers from here. This module imports nothing, so the
engine, the store and the service can all use it.

The Alembic migrations do not: a migration states the schema as it was on its
day and must never change behaviour when these numbers do.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

DEFAULT_CONTEXT_WINDOW: Final = 128_000  # tokens
DEFAULT_SUMMARY_THRESHOLD: Final = 100  # K tokens (x 1024)
DEFAULT_SUMMARY_KEEP_MESSAGES: Final = 10  # messages a summary keeps after its cutoff
DEFAULT_TOOL_RESULT_TOKEN_LIMIT: Final = 300  # a tool result over this is offloaded to a file
# the cited and user-named evidence a summary keeps in view (engine and middleware keyword)
DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS: Final = 600  # tokens

AGENT_DEFAULTS: Final = MappingProxyType(
    {
        "context_window": DEFAULT_CONTEXT_WINDOW,
        "summary_threshold": DEFAULT_SUMMARY_THRESHOLD,
        "summary_keep_messages": DEFAULT_SUMMARY_KEEP_MESSAGES,
        "summary_tool_result_token_limit": DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    }
)
