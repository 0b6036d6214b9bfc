"""The compression engine as LangChain v1 agent middleware, for ``create_agent`` graphs.

``ContextCompressionMiddleware`` runs before every model call. Under the summary trigger the
call passes through (long file-write arguments shortened in the model's view only). At or
over it, large tool results are offloaded first and the input counted again; a summary is
made only if still at or over the trigger, or once when the provider raises
``ContextOverflowError`` (then the call is retried). Messages are never removed.
``TokenUsageMiddleware`` runs inside it and writes every model call's usage snapshot into
``token_usage``. Both write deepagents 0.7's state format (``state_format``), checked by the tests.

The trigger is given once, by name: ``summary_threshold_k`` (x 1024 tokens) or
``summary_trigger_tokens``; one above the context window is ``InvalidInput``. It is
langchain's ``AgentMiddleware`` (deepagents' hooks are private). Usage: the README.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage
from langgraph.config import get_config
from langgraph.types import Command

from yuxi_dash.agents import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
    DEFAULT_SUMMARY_KEEP_MESSAGES,
    DEFAULT_SUMMARY_THRESHOLD,
    DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
)
from yuxi_dash.compression.engine import (
    DEFAULT_TOOL_ARG_MAX_LENGTH,
    auto_compact,
    model_messages,
)
from yuxi_dash.compression.state_format import (
    MODEL_NAME_MAX,
    TOKEN_USAGE_KEY,
    CompressedContextState,
    context_state,
    state_update,
)
from yuxi_dash.compression.summarizers import ExtractiveSummarizer, Summarizer
from yuxi_dash.compression.thread_state import (
    CompressionOutcome,
    ThreadContextState,
    is_summary_message,
)
from yuxi_dash.compression.token_count import count_tokens
from yuxi_dash.errors import InvalidInput
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.usage import summary_trigger_tokens as summary_trigger_tokens_of
from yuxi_dash.usage import usage_snapshot

Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
Clock = Callable[[], datetime]  # when a model call is measured (aware datetimes)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def summary_trigger(
    *,
    context_window: int,
    summary_threshold_k: int | None = None,
    summary_trigger_tokens: int | None = None,
) -> int:
    """The summary trigger in tokens, from exactly one of its two units.

    Neither given: the default agent's ``DEFAULT_SUMMARY_THRESHOLD`` K tokens.
    Refused: both given, a trigger that is not positive, one above the window.
    """
    if summary_threshold_k is not None and summary_trigger_tokens is not None:
        raise InvalidInput(
            "give the summary trigger once: summary_threshold_k (thousands of tokens, x 1024) "
            "or summary_trigger_tokens (tokens), not both"
        )
    if summary_trigger_tokens is not None:
        tokens, given = (
            int(summary_trigger_tokens),
            f"summary_trigger_tokens={summary_trigger_tokens}",
        )
    else:
        k = DEFAULT_SUMMARY_THRESHOLD if summary_threshold_k is None else summary_threshold_k
        tokens, given = summary_trigger_tokens_of(k), f"summary_threshold_k={k} (K x 1024)"
    if tokens <= 0:
        raise InvalidInput(f"the summary trigger must be positive; got {given}")
    if tokens > context_window:
        raise InvalidInput(
            f"{given} is a trigger of {tokens:,} tokens, above the context window of "
            f"{context_window:,} tokens. summary_threshold_k is in thousands of tokens "
            "(x 1024); for a count in tokens pass summary_trigger_tokens"
        )
    return tokens


def _thread_id() -> str:
    """The thread being run (LangGraph's config), or a stand-in outside a graph."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return "thread"
    return str(configurable.get("thread_id") or "thread")


class ContextCompressionMiddleware(AgentMiddleware[CompressedContextState, Any, Any]):
    """Offload, then summarize at the threshold; the state keeps every message."""

    state_schema = CompressedContextState

    def __init__(
        self,
        *,
        workdir: Workdir | Path | str,
        summarizer: Summarizer | None = None,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        summary_threshold_k: int | None = None,
        summary_trigger_tokens: int | None = None,
        keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
        tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
        tool_arg_max_length: int = DEFAULT_TOOL_ARG_MAX_LENGTH,
        summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
    ) -> None:
        super().__init__()
        self.workdir = workdir if isinstance(workdir, Workdir) else Workdir(workdir)
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.threshold_tokens = summary_trigger(
            context_window=context_window,
            summary_threshold_k=summary_threshold_k,
            summary_trigger_tokens=summary_trigger_tokens,
        )
        self.keep_messages = keep_messages
        self.tool_result_token_limit = tool_result_token_limit
        self.tool_arg_max_length = tool_arg_max_length
        self.summary_evidence_budget_tokens = summary_evidence_budget_tokens

    def compact(
        self, state: ThreadContextState, request: ModelRequest[Any], *, overflow: bool
    ) -> CompressionOutcome:
        """The engine's automatic path on ``state`` (writes files, not the agent state)."""
        return auto_compact(
            state,
            workdir=self.workdir,
            summarizer=self.summarizer,
            threshold_tokens=self.threshold_tokens,
            keep_messages=self.keep_messages,
            tool_result_token_limit=self.tool_result_token_limit,
            context_overflow=overflow,
            system=request.system_message,
            tools=request.tools,
            summary_evidence_budget_tokens=self.summary_evidence_budget_tokens,
        )

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Handler
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        before = context_state(_thread_id(), request.state)
        outcome = self.compact(before, request, overflow=False)
        try:
            response = handler(self._request_for(request, outcome))
        except ContextOverflowError:
            if outcome.summarized:
                raise  # already as small as a summary makes it: the provider's answer stands
            outcome = self.compact(outcome.state, request, overflow=True)
            response = handler(self._request_for(request, outcome))
        update = state_update(before, outcome.state)
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _request_for(
        self, request: ModelRequest[Any], outcome: CompressionOutcome
    ) -> ModelRequest[Any]:
        # The state holds only langchain's concrete message classes (AnyMessage); model_messages
        # selects and copies them, so the list is AnyMessage though typed BaseMessage.
        messages = cast(list[AnyMessage], model_messages(outcome.state, self.tool_arg_max_length))
        return request.override(messages=messages)


class TokenUsageMiddleware(AgentMiddleware[CompressedContextState, Any, Any]):
    """After every model call: the usage snapshot of that call, in the state's ``token_usage``.

    Put it after the compression middleware (inside it), so it measures what was
    really sent. ``llm_input_tokens`` is what the provider reported, or the
    engine's count when it reports nothing; ``next_llm_input_tokens`` is the
    count of what the next call sends (this input plus the answer).
    ``model`` is the answer's ``response_metadata`` ``model_name`` (or ``model``),
    cut to `MODEL_NAME_MAX` characters; ``output_tokens`` its ``usage_metadata``
    output tokens. Both are None when the provider does not report them.
    ``measured_at`` is ``clock()`` (default: now, in UTC).
    """

    state_schema = CompressedContextState

    def __init__(
        self,
        *,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        summary_threshold_k: int | None = None,
        summary_trigger_tokens: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__()
        self.context_window = context_window
        self.trigger_tokens = summary_trigger(
            context_window=context_window,
            summary_threshold_k=summary_threshold_k,
            summary_trigger_tokens=summary_trigger_tokens,
        )
        self.clock: Clock = clock or _utcnow

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Handler
    ) -> ExtendedModelResponse[Any]:
        response = handler(request)
        sent: Sequence[BaseMessage] = request.messages
        system, tools = request.system_message, request.tools
        counted = count_tokens(sent, system=system, tools=tools)
        reported = _reported_input_tokens(response.result)
        snapshot = usage_snapshot(
            llm_input_tokens=reported if reported is not None else counted,
            next_llm_input_tokens=count_tokens(
                [*sent, *response.result], system=system, tools=tools
            ),
            context_window=self.context_window,
            summary_trigger_tokens=self.trigger_tokens,
            summary_active=bool(sent) and is_summary_message(sent[0]),
        )
        usage = {
            **snapshot.to_dict(),
            **reported_call(response.result),
            "measured_at": self.clock().isoformat(),
        }
        return ExtendedModelResponse(
            model_response=response, command=Command(update={TOKEN_USAGE_KEY: usage})
        )


def _reported_input_tokens(messages: Sequence[BaseMessage]) -> int | None:
    for message in messages:
        if isinstance(message, AIMessage) and message.usage_metadata:
            return int(message.usage_metadata.get("input_tokens") or 0) or None
    return None


def reported_call(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    """The answer's model name and output tokens as its provider reported them (else None)."""
    for message in messages:
        if isinstance(message, AIMessage):
            meta = message.response_metadata or {}
            name = meta.get("model_name") or meta.get("model")
            out = message.usage_metadata.get("output_tokens") if message.usage_metadata else None
            whole = isinstance(out, int) and not isinstance(out, bool)
            return {
                "model": name[:MODEL_NAME_MAX] if isinstance(name, str) and name else None,
                "output_tokens": out if whole else None,
            }
    return {"model": None, "output_tokens": None}


def context_compression_middleware(
    *,
    workdir: Workdir | Path | str,
    summarizer: Summarizer | None = None,
    context_window: int = DEFAULT_CONTEXT_WINDOW,
    summary_threshold_k: int | None = None,
    summary_trigger_tokens: int | None = None,
    keep_messages: int = DEFAULT_SUMMARY_KEEP_MESSAGES,
    tool_result_token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT,
    clock: Clock | None = None,
    summary_evidence_budget_tokens: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> list[AgentMiddleware[Any, Any, Any]]:
    """Both middlewares in the right order, for ``create_agent(..., middleware=...)``.

    ``context_window`` is in tokens. The summary trigger is ``summary_trigger_tokens``
    (tokens) or ``summary_threshold_k`` (thousands of tokens, x 1024), not both.
    ``summary_evidence_budget_tokens``: what a summary keeps in view of the evidence the
    assistant cited and the user named (``compression.evidence_keep``).
    """
    trigger = summary_trigger(
        context_window=context_window,
        summary_threshold_k=summary_threshold_k,
        summary_trigger_tokens=summary_trigger_tokens,
    )
    return [
        ContextCompressionMiddleware(
            workdir=workdir,
            summarizer=summarizer,
            context_window=context_window,
            summary_trigger_tokens=trigger,
            keep_messages=keep_messages,
            tool_result_token_limit=tool_result_token_limit,
            summary_evidence_budget_tokens=summary_evidence_budget_tokens,
        ),
        TokenUsageMiddleware(
            context_window=context_window, summary_trigger_tokens=trigger, clock=clock
        ),
    ]
