"""count_tokens: langchain-core's approximate counter with system prompt and tool schemas."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from yuxi_dash.compression import count_tokens


def test_counts_match_langchain_core_and_include_system_and_tools() -> None:
    messages = [HumanMessage(content="a" * 400)]
    tools = [{"name": "query_kb", "description": "search", "parameters": {"type": "object"}}]
    assert (
        count_tokens(messages) == count_tokens_approximately(messages) == 101 + 3
    )  # ceil((400 + len("user")) / 4) + 3
    with_system = count_tokens(messages, system="s" * 40)
    assert with_system == count_tokens_approximately([SystemMessage(content="s" * 40), *messages])
    assert count_tokens(messages, system=SystemMessage(content="s" * 40)) == with_system
    with_tools = count_tokens(messages, tools=tools)
    assert with_tools == count_tokens_approximately(messages, tools=tools) > count_tokens(messages)


def test_usage_metadata_does_not_scale_the_count() -> None:
    from langchain_core.messages import AIMessage

    ai = AIMessage(
        content="x" * 40,
        usage_metadata={"input_tokens": 5000, "output_tokens": 10, "total_tokens": 5010},
        response_metadata={"model_provider": "openai"},
    )
    messages = [HumanMessage(content="y" * 40), ai]
    assert count_tokens(messages) == count_tokens_approximately(messages)
