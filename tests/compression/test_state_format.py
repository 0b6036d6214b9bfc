"""deepagents' own SummarizationMiddleware writes a checkpoint; our reader sees what its model saw.

The agent runs deepagents 0.7's middleware over a scripted model, with a real
checkpointer (SQLite file and PostgreSQL). Some kept answers carry Claude
reasoning blocks, which deepagents drops from messages kept across a summary.
The oracle is the input deepagents actually gave the model on its last call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.compression.agents import scripted_model
from tests.compression.deep_agent import claude_script, play, summarizing_agent
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY, context_state


@contextmanager
def checkpointer(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    if kind == "sqlite":
        conn = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
        saver = SqliteSaver(conn)
        saver.setup()
        try:
            yield saver
        finally:
            conn.close()
    else:
        url = request.getfixturevalue("postgres_url").replace("+psycopg", "")
        with PostgresSaver.from_conn_string(url) as saver:
            saver.setup()
            yield saver


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_our_reader_sees_what_deepagents_gave_its_model(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    turns = 7
    model = scripted_model(claude_script(turns))
    config: Any = {"configurable": {"thread_id": f"deep-{kind}"}}
    with checkpointer(kind, tmp_path, request) as saver:
        assert isinstance(saver, BaseCheckpointSaver)
        agent = summarizing_agent(model, saver, tmp_path / "fs")
        play(agent, config["configurable"]["thread_id"], turns)
        values = agent.get_state(config).values
    event = values[SUMMARIZATION_EVENT_KEY]
    assert event is not None and event["cutoff_index"] > 0
    # the state before the last answer is what deepagents read for its last model call
    before_last = {**values, "messages": values["messages"][:-1]}
    ours = context_state(config["configurable"]["thread_id"], before_last)
    seen = model.seen[-1]
    assert [(m.type, m.content) for m in ours.model_visible_messages()] == [
        (m.type, m.content) for m in seen
    ]
    # the case that needs deepagents' reasoning rule: a kept Claude answer lost its thinking
    kept = values["messages"][event["cutoff_index"] : event["created_at_index"]]
    assert any(
        isinstance(m, AIMessage) and isinstance(m.content, list) and len(m.content) == 2
        for m in kept
    )
    assert not any(
        isinstance(m.content, list) and any(b.get("type") == "thinking" for b in m.content)
        for m in seen[1 : 1 + len(kept)]
    )
