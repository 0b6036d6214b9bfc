"""Builders shared by the compression tests: messages, threads, counting summarizers."""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage


class CountingSummarizer:
    """A summarizer that records every call and returns a fixed summary."""

    name = "counting"
    extractive = True

    def __init__(self, text: str = "SESSION INTENT\n- keep going") -> None:
        self.text = text
        self.calls: list[tuple[list[BaseMessage], str | None]] = []

    def summarize(
        self, messages: Sequence[BaseMessage], *, previous_summary: str | None = None
    ) -> str:
        self.calls.append((list(messages), previous_summary))
        return self.text


def tool_exchange(index: int, tool_name: str, content: str) -> list[BaseMessage]:
    call_id = f"call-{index}"
    return [
        AIMessage(
            content="", tool_calls=[{"name": tool_name, "args": {"q": index}, "id": call_id}]
        ),
        ToolMessage(content=content, tool_call_id=call_id, name=tool_name),
    ]


def build_thread(turns: int, *, big_every: int = 0, big_chars: int = 5000) -> list[BaseMessage]:
    """``turns`` rounds of human → tool call → tool result → answer."""
    messages: list[BaseMessage] = []
    for turn in range(turns):
        messages.append(HumanMessage(content=f"Question {turn}: please check item {turn}."))
        body = ("x" * big_chars) if big_every and turn % big_every == 0 else f"result {turn}"
        messages.extend(tool_exchange(turn, "run_command", body))
        messages.append(AIMessage(content=f"Answer {turn}: done with item {turn}."))
    return messages


def kb_payload(count: int, *, kb_id: str = "kb-main") -> str:
    records = []
    for n in range(count):
        records.append(
            {
                "id": f"chunk-{n}",
                "kb_id": kb_id,
                "file_id": f"file-{n}",
                "title": f"Document {n}",
                "source": f"docs/doc-{n}.pdf",
                "score": 0.9 - n / 100,
                "distance": 0.1 + n / 100,
                "content": f"Body of chunk {n}. " * 40,
                "embedding": [0.1] * 16,
                "metadata": {
                    "source": f"docs/doc-{n}.pdf",
                    "filename": f"doc-{n}.pdf",
                    "title": f"Document {n}",
                    "chunk_index": n,
                    "score": 0.9 - n / 100,
                    "rerank_score": 0.5,
                    "hybrid_score": None,
                    "graph_score": None,
                    "distance": 0.1 + n / 100,
                    "author": "someone",
                    "page_count": 12,
                },
            }
        )
    return json.dumps({"query": "retention policy", "kb_id": kb_id, "results": records})
