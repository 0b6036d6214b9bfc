"""Real LangChain agents for middleware tests: `create_agent` graphs over a scripted chat model."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool


class ScriptedChatModel(GenericFakeChatModel):
    """Answers from a script; records every input it was given; can refuse one with an error."""

    seen: list[list[BaseMessage]] = []
    fail_first_with: Any = None

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        if self.fail_first_with is not None:
            error, self.fail_first_with = self.fail_first_with, None
            raise error
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def research_script(turns: int, *, prefix: str = "c") -> Iterator[AIMessage]:
    """Each turn: a query_kb call, then an answer."""
    for turn in range(turns):
        yield AIMessage(
            "",
            tool_calls=[{"name": "query_kb", "args": {"q": f"q{turn}"}, "id": f"{prefix}{turn}"}],
        )
        yield AIMessage(f"answer {turn}")


def query_kb_tool(result: Callable[[str], str]) -> Any:
    @tool
    def query_kb(q: str) -> str:
        """Search the knowledge base."""
        return result(q)

    return query_kb


def scripted_model(script: Iterator[AIMessage]) -> ScriptedChatModel:
    model = ScriptedChatModel(messages=script)
    model.seen = []
    return model
