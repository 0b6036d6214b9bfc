"""Token counting for the compression engine.

One counter everywhere: langchain-core's ``count_tokens_approximately`` (chars/4
per message plus a fixed per-message overhead), with the system prompt counted
as a leading SystemMessage and tool schemas passed through its ``tools``
argument. No usage-metadata scaling, no tokenizer downloads (tiktoken fetches its files at first use, which fails offline).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

SystemPrompt = str | SystemMessage | None


def system_messages(system: SystemPrompt) -> list[BaseMessage]:
    """The system prompt as the zero-or-one message that leads the model input."""
    if system is None:
        return []
    if isinstance(system, SystemMessage):
        return [system]
    return [SystemMessage(content=system)] if system else []


def count_tokens(
    messages: Sequence[BaseMessage],
    system: SystemPrompt = None,
    tools: Sequence[Any] | None = None,
) -> int:
    """Approximate tokens of the model input: system prompt, messages and tool schemas."""
    return count_tokens_approximately(
        [*system_messages(system), *messages],
        tools=list(tools) if tools else None,
        use_usage_metadata_scaling=False,
    )
