"""The fake model and the simulated user: both sides of a conversation, no network.

Owns `SimChatModel` (a deterministic LangChain chat model standing in for the
agent's LLM: one to four rounds of tool calls per turn, then a text answer) and
`user_message` (what the user says at each turn, with an optional remark about
themselves from the demo story).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.config import get_config

from yuxi_dash.compression import message_text
from yuxi_dash.sim.tools import ToolOutputs
from yuxi_dash.sim.topics import Topic, topic_for

_PREAMBLES = (
    "Let me look that up.",
    "I will check the knowledge base first.",
    "Searching for sources now.",
    "Running that to see the current state.",
    "I'll write this down as a file so you can review it.",
)
TOOL_NAMES = ("query_kb", "web_search", "run_command", "write_file")
TOOL_WEIGHTS = (4, 3, 3, 2)  # how often the model picks each tool


def _thread_id() -> str:
    """The thread being run (LangGraph's run config), or a stand-in outside a graph."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return "thread"
    return str(configurable.get("thread_id") or "thread")


def view_digest(seed: str, thread_id: str, messages: Sequence[BaseMessage]) -> str:
    """A SHA-256 of what the model sees, blind to what compaction rewrites.

    It reads each message's kind, the human and assistant text, and the tool-call
    ids, but not tool results or tool-call arguments (an offload or an argument
    truncation replaces those), so a thread replays the same way whether or not
    its tool results were offloaded; a summary changes it, as it changes the view.
    """
    digest = hashlib.sha256(f"{seed}\x1f{thread_id}".encode())
    for message in messages:
        if isinstance(message, ToolMessage):
            part = f"tool\x1f{message.tool_call_id}"
        elif isinstance(message, AIMessage):
            calls = ",".join(str(call.get("id")) for call in message.tool_calls)
            part = f"ai\x1f{message_text(message)}\x1f{calls}"
        else:
            part = f"{message.type}\x1f{message_text(message)}"
        digest.update(b"\x1e" + part.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


class SimChatModel(BaseChatModel):
    """A deterministic stand-in for the agent's LLM, for ``create_agent`` graphs.

    Within a turn it calls one to four rounds of tools (sometimes two calls in
    one round), then answers in text. Each choice comes from a generator seeded
    by ``seed``, the thread id of the run and what the model sees
    (`view_digest`), so the same seed and thread replay the same conversation,
    in any process. The topic comes from the thread id (`topic_for`).
    """

    seed: str = "sim"
    max_tool_rounds: int = 4

    @property
    def _llm_type(self) -> str:
        return "yuxi-sim"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> SimChatModel:
        """The tools are known already (`yuxi_dash.sim.tools`): binding changes nothing."""
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self.reply(_thread_id(), messages)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def reply(self, thread_id: str, messages: Sequence[BaseMessage]) -> AIMessage:
        """The next assistant message of ``thread_id`` given what the model sees."""
        digest = view_digest(self.seed, thread_id, messages)
        rng = random.Random(int(digest[:16], 16))
        topic = topic_for(thread_id)
        rounds_this_turn = 0
        for message in reversed(messages):
            if isinstance(message, HumanMessage):
                break  # the user's message, or the summary standing in for the turns before
            if isinstance(message, AIMessage) and message.tool_calls:
                rounds_this_turn += 1
        wants_tools = rounds_this_turn == 0 or (
            rounds_this_turn < self.max_tool_rounds and rng.random() < 0.55
        )
        message_id = f"ai-{digest[:32]}"
        if wants_tools:
            calls = [_tool_call(rng, topic) for _ in range(2 if rng.random() < 0.2 else 1)]
            preamble = rng.choice(_PREAMBLES) if rng.random() < 0.7 else ""
            return AIMessage(content=preamble, tool_calls=calls, id=message_id)
        return AIMessage(content=answer(rng, topic), id=message_id)


def _tool_call(rng: random.Random, topic: Topic) -> dict[str, Any]:
    name = rng.choices(TOOL_NAMES, TOOL_WEIGHTS)[0]
    if name == "query_kb":
        args: dict[str, Any] = {"query": rng.choice(topic.kb_queries), "kb_id": topic.kb_id}
    elif name == "web_search":
        args = {"query": rng.choice(topic.web_queries)}
    elif name == "run_command":
        args = {"command": rng.choice(topic.commands)}
    else:
        path = rng.choice(topic.files)
        args = {"path": path, "content": ToolOutputs(rng, topic).file_content(path)}
    call_id = f"call_{rng.getrandbits(64):016x}"
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def answer(rng: random.Random, topic: Topic) -> str:
    """A text answer made of topic sentences."""
    points = [f"- {rng.choice(topic.sentences)}" for _ in range(rng.randint(2, 5))]
    return "Here is what I found:\n" + "\n".join(points) + "\nTell me if you want more detail."


def user_message(rng: random.Random, topic: Topic, turn: int, remark: str | None = None) -> str:
    """What the simulated user says at `turn` (the first turn opens the topic).

    `remark` (something the user says about themselves, see `yuxi_dash.sim.story`)
    follows the ask; it draws nothing from `rng`, so the rest of the thread is unchanged.
    """
    if turn == 0:
        return f"{topic.asks[0]} {remark}" if remark else topic.asks[0]
    ask = rng.choice(topic.asks[1:])
    if remark:
        ask = f"{ask} {remark}"
    roll = rng.random()
    if roll < 0.18:  # users paste material into the chat sometimes, now and then a lot
        size = rng.randint(150, 300) if roll < 0.06 else rng.randint(20, 60)
        pasted = " ".join(rng.choice(topic.sentences) for _ in range(size))
        return f"{ask}\n\nHere is what I have so far:\n{pasted}"
    return ask
