"""The checkpoint serializer's allow-list (yuxi_dash.store.checkpoint_serde): no blob runs code.

LangGraph's default serializer imports and calls what a msgpack extension
value names (module, name, argument) unless LANGGRAPH_STRICT_MSGPACK is set:
every test here runs with it unset (and LangGraph's flag read at import made
false too). A blob naming ``os.system`` is refused at any depth and nothing
runs; the types a platform writes still decode; our own checkpointer, on the
embedded SQLite file and on PostgreSQL, refuses such a checkpoint.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command, Interrupt, Send

from yuxi_dash.compression.state_format import TOKEN_USAGE_KEY
from yuxi_dash.errors import CheckpointRefused
from yuxi_dash.settings import get_settings
from yuxi_dash.store.checkpoint_serde import (
    ALLOWED_TYPES,
    CheckpointSerializer,
    checkpoint_serializer,
)
from yuxi_dash.store.thread_store import load_state, state_store, write_state

SINGLE, POSITIONAL, KEYWORDS, METHOD, PYDANTIC_V2 = 0, 1, 2, 3, 5  # LangGraph's ext codes


@pytest.fixture(autouse=True)
def permissive_langgraph(monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph's default: no LANGGRAPH_STRICT_MSGPACK, so its serializer calls what it reads."""
    monkeypatch.delenv("LANGGRAPH_STRICT_MSGPACK", raising=False)
    monkeypatch.setattr(lg_msgpack, "STRICT_MSGPACK_ENABLED", False)


def ext(code: int, *fields: Any) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(fields))


def os_system(marker: Path) -> ormsgpack.Ext:
    """An extension value naming ``os.system`` with a command that leaves ``marker``."""
    return ext(SINGLE, "os", "system", f"touch {marker}")


def poisoned(marker: Path) -> list[tuple[str, Any]]:
    """Where a platform can put the call: top level, in a dict, in a message, as a method."""
    call = os_system(marker)
    in_message = ext(
        PYDANTIC_V2,
        "langchain_core.messages.ai",
        "AIMessage",
        {"content": "hi", "additional_kwargs": {"n": call}},
        "model_validate_json",
    )
    return [
        ("top level", call),
        ("in a dict", {"llm_input_tokens": 5, "x": [1, call]}),
        ("in a message", [in_message]),
        ("as a method", ext(METHOD, "os", "system", f"touch {marker}", "__call__")),
        ("positional", ext(POSITIONAL, "os", "system", [f"touch {marker}"])),
        ("keywords", ext(KEYWORDS, "subprocess", "run", {"args": ["touch", str(marker)]})),
    ]


def test_the_default_serializer_runs_it_here(tmp_path: Path) -> None:
    """The hazard is real with this LangGraph and this environment (so the tests can fail)."""
    marker = tmp_path / "default"
    JsonPlusSerializer().loads_typed(("msgpack", ormsgpack.packb({"x": os_system(marker)})))
    assert marker.exists()


@pytest.mark.parametrize("where", range(6))
def test_a_blob_naming_a_call_is_refused_and_runs_nothing(tmp_path: Path, where: int) -> None:
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    _label, value = poisoned(marker)[where]
    with pytest.raises(CheckpointRefused) as refused:
        checkpoint_serializer().loads_typed(("msgpack", ormsgpack.packb(value)))
    assert refused.value.code == "checkpoint_refused"
    assert refused.value.detail["type"] in ("os.system", "subprocess.run")
    assert not marker.exists()


def test_a_refused_name_is_shown_as_name_characters_only() -> None:
    blob = ormsgpack.packb(ext(SINGLE, "os\x1b[31m\nx", "sys tem", "x"))
    with pytest.raises(CheckpointRefused) as refused:
        CheckpointSerializer().loads_typed(("msgpack", blob))
    assert refused.value.detail["type"] == "os??31m?x.sys?tem"
    assert "\x1b" not in refused.value.message and "\n" not in refused.value.message


def test_the_memo_never_keeps_a_refused_value(tmp_path: Path) -> None:
    marker = tmp_path / "memo"
    blob = ormsgpack.packb([os_system(marker)])
    memo: dict[tuple[int, bytes], Any] = {}
    serde = checkpoint_serializer()
    for _ in range(2):  # met again through the memo: refused again, not the kept payload
        with pytest.raises(CheckpointRefused):
            serde.loads_msgpack(blob, memo)
    assert memo == {} and not marker.exists()
    message = serde.dumps_typed([HumanMessage("hi", id="m1")])[1]
    assert serde.loads_msgpack(message, memo) == [HumanMessage("hi", id="m1")]
    assert len(memo) == 1


def test_the_old_json_format_and_pickle_are_held_to_the_list(tmp_path: Path) -> None:
    serde = checkpoint_serializer()
    lc2 = {"lc": 2, "type": "constructor", "id": ["os", "system"], "args": ["touch x"]}
    lc1 = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "prompts", "prompt", "PromptTemplate"],
        "kwargs": {"template": "{x}", "input_variables": ["x"]},
    }
    for value in (lc2, {"nested": [lc1]}):
        with pytest.raises(CheckpointRefused):
            serde.loads_typed(("json", json.dumps(value).encode()))
    message = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "HumanMessage"],
        "kwargs": {"content": "hi"},
    }
    assert serde.loads_typed(("json", json.dumps([message]).encode())) == [HumanMessage("hi")]
    with pytest.raises(CheckpointRefused):
        serde.loads_typed(("pickle", b"\x80\x04K\x01."))


def test_what_a_platform_writes_still_decodes() -> None:
    serde = checkpoint_serializer()
    values: dict[str, Any] = {
        "messages": [
            SystemMessage("be brief"),
            HumanMessage("hi", id="h1"),
            AIMessage(
                "",
                id="a1",
                tool_calls=[{"name": "query_kb", "args": {"q": "x"}, "id": "c1"}],
                usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
                additional_kwargs={"n": 2**63 - 1},
            ),
            ToolMessage("result", tool_call_id="c1", id="t1"),
            RemoveMessage(id="h1"),
        ],
        TOKEN_USAGE_KEY: {"llm_input_tokens": 12, "measured_at": "2026-12-02T19:00:00+00:00"},
        "when": datetime(2026, 12, 2, tzinfo=UTC),
        "ids": {uuid.UUID(int=7)},
        "sends": [Send("tools", {"x": 1}), Interrupt(value="ok?", id="i1")],
        "command": Command(goto="model"),
    }
    assert serde.loads_typed(serde.dumps_typed(values)) == values


def test_the_list_holds_every_type_langgraph_admits_on_its_own() -> None:
    """LangGraph admits its own safe list whatever it is given: ours says so, and no more."""
    assert lg_msgpack.SAFE_MSGPACK_TYPES <= ALLOWED_TYPES
    extra = ALLOWED_TYPES - lg_msgpack.SAFE_MSGPACK_TYPES
    assert extra == set()  # nothing beyond it is needed by the platform states read in tests


def _poison_own_checkpoint(thread_id: str, marker: Path) -> None:
    """Put an ``os.system`` call into the thread's stored ``token_usage`` (our own tables)."""
    saver: Any = state_store(get_settings()).saver
    call = os_system(marker)
    if isinstance(saver, SqliteSaver):  # the SQLite saver: the whole checkpoint is one blob
        rows = saver.conn.execute(
            "SELECT checkpoint_id, checkpoint FROM checkpoints WHERE thread_id = ?", (thread_id,)
        ).fetchall()
        for checkpoint_id, blob in rows:
            raw = ormsgpack.unpackb(blob, ext_hook=ormsgpack.Ext)
            raw["channel_values"][TOKEN_USAGE_KEY] = {"x": call}
            saver.conn.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
                (ormsgpack.packb(raw), thread_id, checkpoint_id),
            )
        saver.conn.commit()
        return
    with saver.conn.connection() as conn:  # PostgreSQL: one blob per channel version
        conn.execute(
            "UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND channel = %s",
            (ormsgpack.packb({"x": call}), thread_id, TOKEN_USAGE_KEY),
        )


def test_our_own_checkpointer_refuses_a_poisoned_checkpoint(db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / f"own-{uuid.uuid4().hex}"
    write_state(
        "t-own",
        {"messages": [HumanMessage("hi")], TOKEN_USAGE_KEY: {"llm_input_tokens": 3}},
        expected_checkpoint_id=None,
    )
    assert load_state("t-own") is not None
    _poison_own_checkpoint("t-own", marker)
    with pytest.raises(CheckpointRefused):
        load_state("t-own")
    with pytest.raises(CheckpointRefused):
        list(state_store(get_settings()).history("t-own"))
    assert not marker.exists()
