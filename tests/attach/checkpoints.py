"""Checkpoints written straight into a platform's saver tables, as its owner (for odd rows).

`put_checkpoint` writes one root checkpoint of a thread with LangGraph's own
PostgresSaver (``put``), with the channel values, id and metadata given: a
row the attach scan must survive (a checkpoint dated 2100, NaN usage, NUL
text, a thread id with a newline). Returns the checkpoint's id.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg import Connection
from psycopg.rows import dict_row


def usage(next_tokens: float, *, llm: float | None = None, window: float = 8000) -> dict[str, Any]:
    """A ``token_usage`` value with these figures (anything, for poison rows)."""
    return {
        "llm_input_tokens": next_tokens if llm is None else llm,
        "next_llm_input_tokens": next_tokens,
        "context_window": window,
        "summary_trigger_tokens": 25_000,
        "summary_active": False,
    }


def values(text: str = "hello", *, tokens: float = 1000, message_id: str = "m1") -> dict[str, Any]:
    return {"messages": [HumanMessage(text, id=message_id)], "token_usage": usage(tokens)}


def put_checkpoint(
    conninfo: str,
    thread_id: str,
    channel_values: dict[str, Any],
    *,
    checkpoint_id: str | None = None,
    parent: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    """One root checkpoint of ``thread_id`` in the platform's tables (the saver's ``put``)."""
    with Connection.connect(conninfo, autocommit=True, row_factory=dict_row) as conn:
        saver = PostgresSaver(conn)  # type: ignore[arg-type]
        saver.setup()
        checkpoint = empty_checkpoint()
        if checkpoint_id is not None:
            checkpoint["id"] = checkpoint_id
        previous = None
        if parent is not None:
            found = saver.get_tuple(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": "",
                        "checkpoint_id": parent,
                    }
                }
            )
            assert found is not None
            previous = found.checkpoint["channel_versions"]
        versions = {
            channel: saver.get_next_version((previous or {}).get(channel), None)
            for channel in channel_values
        }
        checkpoint["channel_values"] = dict(channel_values)
        checkpoint["channel_versions"] = versions
        configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
        if parent is not None:
            configurable["checkpoint_id"] = parent
        saver.put(
            {"configurable": configurable},
            checkpoint,
            {"source": "loop", "step": 1, **(metadata or {})},
            versions,
        )
    return str(checkpoint["id"])
