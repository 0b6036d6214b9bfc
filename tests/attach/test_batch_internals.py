"""What `yuxi_dash.attach.batch` assumes of langgraph, checked on the installed version.

batch.py reads the saver's tables in plain SQL (their layout, from the saver's own
migrations), takes a checkpoint's stored stream channels (`Pregel.stream_channels_asis`)
as its state values, and decodes blobs with the serializer's `_unpack_ext_hook` (through
`store.checkpoint_serde`, the one private part left). pyproject.toml pins langgraph to
the range these ran with; an upgrade that changes one fails here, naming it. The graph is
a real LangGraph graph on LangGraph's own in-memory saver.
"""

from __future__ import annotations

import importlib.metadata
import operator
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import base as postgres_base
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, MessagesState, StateGraph
from packaging.requirements import Requirement

from yuxi_dash.attach import batch

REPO = Path(__file__).resolve().parents[2]
CONFIG: Any = {"configurable": {"thread_id": "internals"}}


@contextmanager
def internal(name: str) -> Iterator[None]:
    """Turn any error inside into one failure line naming the langgraph internal."""
    try:
        yield
    except Exception as exc:
        pytest.fail(
            f"langgraph internal {name} changed ({type(exc).__name__}: {exc}); "
            "yuxi_dash/attach/batch.py uses it: adapt batch.py before widening the pin",
            pytrace=False,
        )


def test_the_installed_langgraph_is_in_the_pinned_range() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (pin,) = [r for r in map(Requirement, project["dependencies"]) if r.name == "langgraph"]
    assert pin.specifier.filter([importlib.metadata.version("langgraph")]), (
        f"langgraph {importlib.metadata.version('langgraph')} is outside the pin {pin}: "
        "run this file, adapt yuxi_dash/attach/batch.py, then move the pin"
    )
    assert any(spec.operator in ("<", "<=", "==", "~=") for spec in pin.specifier), (
        f"langgraph must have an upper bound while attach/batch.py uses its internals: {pin}"
    )


class NotedState(MessagesState):
    notes: Annotated[list[str], operator.add]  # a second aggregate, never written
    mood: str  # a plain channel, never written


def test_a_state_shapes_values_are_get_states_values_at_every_checkpoint() -> None:
    """batch.py reads a checkpoint without writes of no task as its stored values (the graph's
    stream channels; a never-written aggregate as its empty value): the same as get_state, at
    every checkpoint of a run, the input one (step -1) included."""

    def answer(state: NotedState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}")]}

    builder = StateGraph(NotedState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    compiled = builder.compile(checkpointer=InMemorySaver())
    compiled.invoke({"messages": [HumanMessage("hello")]}, CONFIG)
    saved = list(compiled.checkpointer.list(CONFIG))
    assert {t.metadata["step"] for t in saved} >= {-1, 0, 1}
    for one in saved:
        assert not [w for w in one.pending_writes if w[0] == batch.NULL_TASK_ID]
        stored = one.checkpoint["channel_values"]
        with internal("Pregel.stream_channels_asis and a channel's copy().get()"):
            shape = batch.StateShape.of(compiled)
        values = shape.values(stored)
        assert values == compiled.get_state(one.config).values, one.metadata["step"]
        assert values["notes"] == []  # never written: the aggregate's empty value
        assert "mood" not in values
        only = shape.values(stored, only={"notes"})
        assert only == {"notes": []}


def test_the_serializers_ext_hook_decodes_what_loads_typed_decodes() -> None:
    serde = JsonPlusSerializer()
    stored = serde.dumps_typed({"messages": [HumanMessage("hi"), AIMessage("hello")]})
    with internal("JsonPlusSerializer._unpack_ext_hook"):
        hook = serde._unpack_ext_hook
        decoded = ormsgpack.unpackb(stored[1], ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    assert stored[0] == "msgpack" and decoded == serde.loads_typed(stored), (
        "langgraph internal JsonPlusSerializer._unpack_ext_hook no longer decodes as loads_typed"
    )


def test_the_saver_tables_have_the_columns_batch_reads() -> None:
    wanted = {
        "checkpoints": ("parent_checkpoint_id", "checkpoint", "metadata"),
        "checkpoint_blobs": ("channel", "version", "type", "blob"),
        "checkpoint_writes": ("task_id", "idx", "channel", "type", "blob", "task_path"),
    }
    for table, columns in wanted.items():
        statements = [
            sql for sql in postgres_base.MIGRATIONS if re.search(rf"TABLE.*\b{table} ", sql)
        ]
        for column in ("thread_id", "checkpoint_ns", *columns):
            assert any(re.search(rf"\b{column}\b", sql) for sql in statements), (
                f"langgraph-checkpoint-postgres no longer has {table}.{column} (batch.py reads it)"
            )
