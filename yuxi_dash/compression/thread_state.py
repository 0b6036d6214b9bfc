"""The state model of one thread: its messages, its summary event, a compression's outcome.

``ThreadContextState`` holds every message of the thread (never dropped) plus the
latest ``SummaryEvent``; what the model sees is the summary message followed by
the messages from ``cutoff_index`` on (deepagents' rule). ``to_storage`` /
``from_storage`` give a plain-JSON form (``messages_to_dict``); the store keeps
the state as a LangGraph checkpoint instead (``compression.state_format``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    message_to_dict,
    messages_from_dict,
    messages_to_dict,
)

from yuxi_dash.files.workdir import SavedFile

if TYPE_CHECKING:  # they read states: imported for the annotations only
    from yuxi_dash.compression.evidence_keep import KeptEvidence
    from yuxi_dash.compression.evidence_ledger import Ledger

SUMMARY_SOURCE = "summarization"
SAVED_RESULT_MARKER = "[Tool result saved]"


def is_summary_message(message: BaseMessage) -> bool:
    """True for a summary message written by the engine (``lc_source=summarization``)."""
    return (
        isinstance(message, HumanMessage)
        and message.additional_kwargs.get("lc_source") == SUMMARY_SOURCE
    )


def message_text(message: BaseMessage) -> str:
    """The text of a message's content (text blocks joined; other blocks skipped)."""
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def chat_text(message: BaseMessage) -> str:
    """What the chat record shows of a message: its text, else the tools an AI message calls.

    An assistant turn that only calls tools has no text; the record shows each call
    as ``calls NAME {args as JSON}`` on its own line instead of an empty cell.
    """
    text = message_text(message)
    calls = getattr(message, "tool_calls", None) or []
    if text or not calls:
        return text
    return "\n".join(
        f"calls {call.get('name') or 'a tool'} "
        + json.dumps(call.get("args") or {}, ensure_ascii=False, sort_keys=True, default=str)
        for call in calls
    )


_CHAT_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def chat_role(message: BaseMessage) -> str:
    """The chat-record role of a message: user, assistant, tool or system (a streamed chunk's
    too: ``AIMessageChunk`` is the assistant's)."""
    kind = message.type
    if kind.endswith("MessageChunk"):
        kind = kind.removesuffix("MessageChunk").lower()
    return _CHAT_ROLES.get(kind, kind)


@dataclass(frozen=True)
class SummaryEvent:
    """The latest summary: messages before ``cutoff_index`` are replaced by ``summary_message``.

    The same fields as deepagents' ``_summarization_event``. ``created_at_index``
    is the number of messages when the summary was made (absent on older events):
    messages from the cutoff up to it were kept from before the summary, and lose
    the reasoning blocks Claude binds to the conversation before them.
    """

    cutoff_index: int
    summary_message: HumanMessage
    file_path: str
    created_at_index: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "cutoff_index": self.cutoff_index,
            "summary_message": message_to_dict(self.summary_message),
            "file_path": self.file_path,
        }
        if self.created_at_index is not None:
            data["created_at_index"] = self.created_at_index
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SummaryEvent:
        (message,) = messages_from_dict([data["summary_message"]])
        if not isinstance(message, HumanMessage):
            raise ValueError("summary_message must be a human message")
        created = data.get("created_at_index")
        return cls(
            cutoff_index=int(data["cutoff_index"]),
            summary_message=message,
            file_path=str(data.get("file_path") or ""),
            created_at_index=created if isinstance(created, int) else None,
        )


_NATIVE_REASONING_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning_content"})
_BEDROCK_PROVIDERS = frozenset({"bedrock", "bedrock_converse"})


def _bound_reasoning_types(message: AIMessage) -> frozenset[str]:
    """Block types of ``message`` whose reasoning is bound to the conversation before it.

    Only Claude binds reasoning so (directly, or on Bedrock); untagged messages
    are checked for the native block types only; other providers keep theirs.
    """
    provider = message.response_metadata.get("model_provider")
    if provider is None:
        return _NATIVE_REASONING_BLOCKS
    model = str(message.response_metadata.get("model_name", "")).lower()
    if provider == "anthropic" or (
        provider in _BEDROCK_PROVIDERS and ("claude" in model or "anthropic" in model)
    ):
        return _NATIVE_REASONING_BLOCKS | {"reasoning"}
    return frozenset()


def without_bound_reasoning(message: BaseMessage) -> BaseMessage:
    """A message kept from before a summary, as the model sees it: bound reasoning removed."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return message
    bound = _bound_reasoning_types(message)
    content = [
        block
        for block in message.content
        if not (isinstance(block, dict) and block.get("type") in bound)
    ]
    if len(content) == len(message.content):
        return message
    return message.model_copy(update={"content": content})


@dataclass(frozen=True)
class ThreadContextState:
    """All messages of a thread plus its latest summary event (the checkpoint's context part)."""

    thread_id: str
    messages: list[BaseMessage]
    summary: SummaryEvent | None = None
    history_session_id: str = ""

    @property
    def visible_start(self) -> int:
        """Index of the first message the model still sees after the summary."""
        if self.summary is None:
            return 0
        return max(0, min(self.summary.cutoff_index, len(self.messages)))

    def model_visible_messages(self) -> list[BaseMessage]:
        """``[summary] + messages[cutoff:]`` when summarized, else every message.

        Computed as deepagents computes it: messages kept from before the summary
        (cutoff up to ``created_at_index``) lose their bound reasoning blocks.
        """
        if self.summary is None:
            return list(self.messages)
        start = self.visible_start
        kept_from = self.summary.created_at_index
        if kept_from is None:
            kept_from = start
        visible: list[BaseMessage] = [self.summary.summary_message]
        for index, message in enumerate(self.messages[start:], start=start):
            visible.append(without_bound_reasoning(message) if index < kept_from else message)
        return visible

    def summary_active(self) -> bool:
        """True when the first model-visible message is the summary message."""
        visible = self.model_visible_messages()
        return bool(visible) and is_summary_message(visible[0])

    def to_storage(self) -> dict[str, Any]:
        return {
            "messages": messages_to_dict(self.messages),
            "summary": self.summary.to_dict() if self.summary else None,
            "history_session_id": self.history_session_id,
        }

    @classmethod
    def from_storage(cls, thread_id: str, data: dict[str, Any] | None) -> ThreadContextState:
        data = data or {}
        summary_data = data.get("summary")
        return cls(
            thread_id=thread_id,
            messages=list(messages_from_dict(data.get("messages") or [])),
            summary=SummaryEvent.from_dict(summary_data) if summary_data else None,
            history_session_id=str(data.get("history_session_id") or ""),
        )


@dataclass(frozen=True)
class CompressionOutcome:
    """What one force/auto compression did; ``state`` is the state to write (or the input on no_op)."""

    status: Literal["completed", "no_op"]
    reason: str | None
    before_tokens: int
    after_tokens: int
    compressed_messages: int
    file_path: str | None
    state: ThreadContextState
    summarized: bool = False
    saved_files: list[tuple[str | None, str, SavedFile]] = field(default_factory=list)
    evidence: KeptEvidence | None = None  # a summary's kept evidence, ledger and index

    @property
    def ledger(self) -> Ledger | None:
        """The summary's evidence ledger (the evidence index counted); None without a summary."""
        return self.evidence.ledger if self.evidence is not None else None

    @property
    def evidence_index(self) -> str | None:
        """The evidence index the summary names (workdir path); None: no summary, or no item."""
        return self.evidence.index_path if self.evidence is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The result fields the service and CLI report (no message content)."""
        return {
            "status": self.status,
            "reason": self.reason,
            "before_tokens": self.before_tokens,
            "after_tokens": self.after_tokens,
            "compressed_messages": self.compressed_messages,
            "file_path": self.file_path,
            "summarized": self.summarized,
            "saved_files": [
                {
                    "tool_call_id": call_id,
                    "tool_name": name,
                    "path": saved.path,
                    "sha256": saved.sha256,
                    "chars": saved.chars,
                }
                for call_id, name, saved in self.saved_files
            ],
        }
