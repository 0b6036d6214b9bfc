"""The langgraph internals `yuxi_dash.attach.batch` reads, checked by name on the installed version.

batch.py calls private parts of langgraph (`pregel._checkpoint.channels_from_checkpoint`,
`pregel._io.read_channels`, `Pregel._migrate_checkpoint`, `Pregel._prepare_state_snapshot`,
`Pregel.stream_channels_asis`, the Postgres saver's `_load_writes`, the serializer's
`_unpack_ext_hook`) and the saver's table layout. pyproject.toml pins langgraph to the
range these ran with; an upgrade that changes one fails here, naming it. The graph is a
real LangGraph graph on LangGraph's own in-memory saver.
"""

from __future__ import annotations

import copy
import importlib.metadata
import re
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="module")
def graph() -> Any:
    """A two-step messages graph that ran once on LangGraph's in-memory saver."""

    def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer)
    builder.add_edge(START, "answer")
    compiled = builder.compile(checkpointer=InMemorySaver())
    compiled.invoke({"messages": [HumanMessage("hello")]}, CONFIG)
    return compiled


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


def test_channels_from_checkpoint_and_read_channels_give_the_state_values(graph: Any) -> None:
    saver = graph.checkpointer
    saved = saver.get_tuple(CONFIG)
    checkpoint = copy.deepcopy(saved.checkpoint)
    with internal("Pregel._migrate_checkpoint(checkpoint)"):
        graph._migrate_checkpoint(checkpoint)
    with internal("langgraph.pregel._checkpoint.channels_from_checkpoint"):
        channels, _ = batch.channels_from_checkpoint(
            graph.channels, checkpoint, saver=saver, config=saved.config
        )
    with internal("langgraph.pregel._io.read_channels on Pregel.stream_channels_asis"):
        values = batch.read_channels(channels, graph.stream_channels_asis)
    assert values == graph.get_state(CONFIG).values, (
        "langgraph internals channels_from_checkpoint + read_channels no longer give get_state's values"
    )


def test_prepare_state_snapshot_gives_get_states_snapshot(graph: Any) -> None:
    saved = graph.checkpointer.get_tuple(CONFIG)
    with internal("Pregel._prepare_state_snapshot(config, saved, saver=)"):
        snapshot = graph._prepare_state_snapshot(saved.config, saved, saver=graph.checkpointer)
    state = graph.get_state(CONFIG)
    assert (snapshot.values, snapshot.next) == (state.values, state.next), (
        "langgraph internal Pregel._prepare_state_snapshot no longer gives get_state's snapshot"
    )


def test_the_postgres_savers_load_writes_reads_the_rows_batch_selects() -> None:
    """batch.ROWS_SQL aggregates each write as [task_id, channel, type, blob, task_path, idx]."""
    serde = JsonPlusSerializer()
    kind, blob = serde.dumps_typed([HumanMessage("pending")])
    row = [batch.NULL_TASK_ID.encode(), b"messages", kind.encode(), blob, b"", b"0"]
    with internal("BasePostgresSaver._load_writes(rows of six bytes columns)"):
        loaded = postgres_base.BasePostgresSaver(serde=serde)._load_writes([row])
    assert loaded == [(batch.NULL_TASK_ID, "messages", [HumanMessage("pending")])], (
        "langgraph internal BasePostgresSaver._load_writes reads the write rows differently"
    )


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
