"""The simulated agents as real LangChain agents: `create_agent` graphs with our middleware.

Owns `AgentProfile` (an agent's compression settings, as the `agents` table
holds them), the simulator's three agents (`SIM_AGENTS`; `report-writer` lacks
`context_compression`), `build_agent` (a `langchain.agents.create_agent` graph
over `SimChatModel` and `SIM_TOOLS`, with the compression middleware for an
agent that has `context_compression`, only the token-usage middleware for one
that has not, and the given LangGraph checkpointer) and `play_turn` (one user
message through that graph; its run config names the thread's user and agent).
Every compaction, offload and summary is the middleware's own; nothing here
touches the dashboard's tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from yuxi_dash.agents import DEFAULT_SUMMARY_KEEP_MESSAGES, DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.compression import Summarizer, is_summary_message
from yuxi_dash.compression.middleware import (
    Clock,
    TokenUsageMiddleware,
    context_compression_middleware,
)
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.sim.model import SimChatModel
from yuxi_dash.sim.tools import SIM_TOOLS
from yuxi_dash.store.models import CONTEXT_COMPRESSION
from yuxi_dash.usage import summary_trigger_tokens

Agent = CompiledStateGraph[Any, Any, Any, Any]


@dataclass(frozen=True)
class AgentProfile:
    """An agent's compression settings, as the `agents` table holds them."""

    slug: str
    name: str
    capabilities: tuple[str, ...]
    context_window: int
    summary_threshold: int
    summary_keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES
    summary_tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT

    @property
    def trigger_tokens(self) -> int:
        return summary_trigger_tokens(self.summary_threshold)

    @property
    def capable(self) -> bool:
        return CONTEXT_COMPRESSION in self.capabilities

    def agent_fields(self) -> dict[str, Any]:
        """Keyword arguments for `yuxi_dash.service.upsert_agent`."""
        return {
            "name": self.name,
            "capabilities": list(self.capabilities),
            "context_window": self.context_window,
            "summary_threshold": self.summary_threshold,
            "summary_keep_messages": self.summary_keep_messages,
            "summary_tool_result_token_limit": self.summary_tool_result_token_limit,
        }

    @classmethod
    def from_row(cls, row: Any) -> AgentProfile:
        return cls(
            slug=row.slug,
            name=row.name,
            capabilities=tuple(row.capabilities or ()),
            context_window=row.context_window,
            summary_threshold=row.summary_threshold,
            summary_keep_messages=row.summary_keep_messages,
            summary_tool_result_token_limit=row.summary_tool_result_token_limit,
        )


# Small thresholds keep the demo light while still crossing them; agents
# without `context_compression` run no summarization at all, so their threads
# grow past 100% of the threshold.
SIM_AGENTS: tuple[AgentProfile, ...] = (
    AgentProfile(
        slug="research-assistant",
        name="Research assistant",
        capabilities=(CONTEXT_COMPRESSION, "knowledge_base", "web_search", "files"),
        context_window=128_000,
        summary_threshold=12,
    ),
    AgentProfile(
        slug="ops-copilot",
        name="Ops copilot",
        capabilities=(CONTEXT_COMPRESSION, "shell", "knowledge_base", "files"),
        context_window=64_000,
        summary_threshold=8,
    ),
    AgentProfile(
        slug="report-writer",
        name="Report writer (no compression)",
        capabilities=("knowledge_base", "web_search", "files"),
        context_window=24_000,
        summary_threshold=8,
    ),
)
DEFAULT_SIM_AGENT = "ops-copilot"


def sim_agent(slug: str) -> AgentProfile | None:
    return next((agent for agent in SIM_AGENTS if agent.slug == slug), None)


def agent_middleware(
    profile: AgentProfile,
    *,
    workdir: Workdir | None = None,
    summarizer: Summarizer | None = None,
    clock: Clock | None = None,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """The middleware of ``profile``'s agent: compression and token usage, or token usage only."""
    if not profile.capable:
        return [
            TokenUsageMiddleware(
                context_window=profile.context_window,
                summary_threshold_k=profile.summary_threshold,
                clock=clock,
            )
        ]
    if workdir is None or summarizer is None:
        raise ValueError(f"agent {profile.slug} compacts: give it a workdir and summarizer")
    return context_compression_middleware(
        workdir=workdir,
        summarizer=summarizer,
        context_window=profile.context_window,
        summary_threshold_k=profile.summary_threshold,
        keep_messages=profile.summary_keep_messages,
        tool_result_token_limit=profile.summary_tool_result_token_limit,
        clock=clock,
    )


def build_agent(
    profile: AgentProfile,
    *,
    checkpointer: BaseCheckpointSaver[Any],
    seed: str = "sim",
    workdir: Workdir | None = None,
    summarizer: Summarizer | None = None,
    clock: Clock | None = None,
    extra_middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
    inner_middleware: Sequence[AgentMiddleware[Any, Any, Any]] = (),
) -> Agent:
    """``create_agent(SimChatModel, SIM_TOOLS, middleware=..., checkpointer=checkpointer)``.

    An agent with ``context_compression`` needs ``workdir`` and ``summarizer``
    (ValueError otherwise); ``seed`` seeds the model; ``clock`` stamps the
    usage of each model call (default: now); ``extra_middleware`` goes first
    (outermost), ``inner_middleware`` just inside the compression middleware
    (it sees what the model is sent) and outside the token-usage middleware.
    """
    *outer, usage = agent_middleware(profile, workdir=workdir, summarizer=summarizer, clock=clock)
    return create_agent(
        SimChatModel(seed=seed),
        list(SIM_TOOLS),
        middleware=[*extra_middleware, *outer, *inner_middleware, usage],
        checkpointer=checkpointer,
        name=profile.slug,
    )


def run_config(
    thread_id: str, *, user_id: str | None = None, agent: str | None = None
) -> RunnableConfig:
    """The run config naming the thread (LangGraph's ``thread_id``), its user and its agent.

    LangGraph copies ``configurable.user_id`` and ``metadata.assistant_id`` into
    each checkpoint's metadata, where an attached dashboard reads them.
    """
    configurable: dict[str, Any] = {"thread_id": thread_id}
    if user_id:
        configurable["user_id"] = user_id
    config: RunnableConfig = {"configurable": configurable}
    if agent:
        config["metadata"] = {"assistant_id": agent}
    return config


def play_turn(
    agent: Agent,
    thread_id: str,
    text: str,
    *,
    max_model_calls: int | None = None,
    user_id: str | None = None,
    agent_slug: str | None = None,
) -> None:
    """One user message through the agent: to its answer, or paused after ``max_model_calls``.

    A paused turn stops before the tool node, with the last model call's tool
    calls pending in the checkpoint (what a run interrupted for a tool
    approval, or still running, leaves behind). ``user_id`` and ``agent_slug``
    go into the run config (`run_config`), so the checkpoints name them.
    """
    config = run_config(thread_id, user_id=user_id, agent=agent_slug)
    payload: dict[str, Any] | None = {"messages": [HumanMessage(text)]}
    if max_model_calls is None:
        agent.invoke(payload, config)
        return
    for _ in range(max_model_calls):
        agent.invoke(payload, config, interrupt_before=["tools"])
        payload = None  # resume the paused run
        if not agent.get_state(config).next:
            return  # the model answered: the turn is over


def turns_played(values: Mapping[str, Any] | None) -> int:
    """How many user messages a thread's state holds (its turns so far)."""
    messages: Sequence[Any] = (values or {}).get("messages") or []
    return sum(
        1
        for message in messages
        if isinstance(message, HumanMessage) and not is_summary_message(message)
    )
