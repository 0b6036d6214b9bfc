"""Summarizers: OpenAI-compatible over real HTTP (local stub server), and the extractive one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.compression.builders import kb_payload
from yuxi_dash.compression import (
    SECTIONS,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    ThreadContextState,
    compact_messages,
    force_summarize,
    get_summarizer,
)
from yuxi_dash.errors import SummarizerFailed
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import Settings

GOOD_SUMMARY = "\n".join(f"{section}\n- point" for section in SECTIONS)


class StubChatServer:
    """A tiny OpenAI-compatible /v1/chat/completions endpoint on 127.0.0.1:0."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.reply: str | None = GOOD_SUMMARY
        self.status = 200
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length", "0"))
                stub.requests.append(json.loads(self.rfile.read(length)))
                stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                body: dict[str, Any]
                if stub.status != 200:
                    body = {"error": {"message": "overloaded", "type": "server_error"}}
                else:
                    body = {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "stub-model",
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": stub.reply},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                raw = json.dumps(body).encode()
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"


@pytest.fixture
def stub_server() -> Iterator[StubChatServer]:
    stub = StubChatServer()
    stub.thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def _conversation() -> list:
    return [
        HumanMessage(content="Build a retention report for Q3. It must be in Markdown."),
        AIMessage(
            content="I will query the knowledge base first.",
            tool_calls=[{"name": "query_kb", "args": {"query": "retention"}, "id": "k1"}],
        ),
        ToolMessage(content=kb_payload(4), tool_call_id="k1", name="query_kb"),
        AIMessage(
            content="Decided to use docs/doc-0.pdf as the main source. Next I will draft report.md.",
        ),
        HumanMessage(
            content="Please don't include customer names. See https://intra.example/policy."
        ),
    ]


def test_openai_compatible_summarizer_over_real_http(stub_server: StubChatServer) -> None:
    settings = Settings(
        summarizer_base_url=stub_server.base_url,
        summarizer_model="stub-model",
        summarizer_api_key="sk-test",
        summarizer_timeout_seconds=5,
    )
    summarizer = get_summarizer(settings)
    assert isinstance(summarizer, OpenAICompatibleSummarizer) and not summarizer.extractive
    text = summarizer.summarize(_conversation(), previous_summary="SESSION INTENT\n- earlier goal")
    assert text == GOOD_SUMMARY
    (request,) = stub_server.requests
    assert request["model"] == "stub-model"
    system, user = request["messages"]
    assert system["role"] == "system"
    for section in SECTIONS:
        assert section in system["content"]
    assert "earlier goal" in user["content"]
    assert "retention report for Q3" in user["content"]
    assert "-> calls query_kb" in user["content"]
    assert stub_server.headers[0].get("authorization") == "Bearer sk-test"


def test_openai_compatible_empty_reply_and_http_error_raise(stub_server: StubChatServer) -> None:
    summarizer = OpenAICompatibleSummarizer(
        base_url=stub_server.base_url, model="stub-model", timeout_seconds=5, max_retries=0
    )
    stub_server.reply = "   "
    with pytest.raises(SummarizerFailed):
        summarizer.summarize(_conversation())
    stub_server.reply = None
    with pytest.raises(SummarizerFailed):
        summarizer.summarize(_conversation())
    stub_server.status = 503
    with pytest.raises(SummarizerFailed) as raised:
        summarizer.summarize(_conversation())
    assert "overloaded" not in str(raised.value)  # error text never becomes or leaks a summary


def test_http_failure_during_force_summarize_writes_nothing(
    stub_server: StubChatServer, tmp_path
) -> None:
    stub_server.status = 500
    summarizer = OpenAICompatibleSummarizer(
        base_url=stub_server.base_url, model="m", timeout_seconds=5, max_retries=0
    )
    workdir = Workdir(tmp_path / "wd")
    state = ThreadContextState("t", _conversation() * 4)
    with pytest.raises(SummarizerFailed):
        force_summarize(state, workdir=workdir, summarizer=summarizer, keep_messages=3)
    assert not (workdir.root / "outputs/conversation_history").exists()


def test_get_summarizer_defaults_to_extractive() -> None:
    summarizer = get_summarizer(Settings())
    assert isinstance(summarizer, ExtractiveSummarizer) and summarizer.extractive


def test_extractive_summary_fills_five_sections(tmp_path) -> None:
    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    messages = compact_messages(_conversation(), workdir)
    text = ExtractiveSummarizer().summarize(messages)
    assert "Extractive summary" in text
    positions = [text.index(f"## {section}") for section in SECTIONS]
    assert positions == sorted(positions)
    sections = {
        section: text[text.index(f"## {section}") :].split("\n## ")[0] for section in SECTIONS
    }
    assert "retention report for Q3" in sections["SESSION INTENT"]
    assert "must be in Markdown" in sections["USER REQUIREMENTS AND PREFERENCES"]
    assert "don't include customer names" in sections["USER REQUIREMENTS AND PREFERENCES"]
    assert "Decided to use docs/doc-0.pdf" in sections["PROGRESS AND DECISIONS"]
    assert "Called query_kb" in sections["PROGRESS AND DECISIONS"]
    artifacts = sections["ARTIFACTS AND REFERENCES"]
    assert "outputs/large_tool_results/query_kb-" in artifacts
    assert "https://intra.example/policy" in artifacts
    assert "docs/doc-0.pdf" in artifacts and "report.md" in artifacts
    assert "draft report.md" in sections["NEXT STEPS"]
    assert "Answer the user's latest request" in sections["NEXT STEPS"]


def test_extractive_lists_document_ids_of_unsaved_results() -> None:
    messages = [ToolMessage(content=kb_payload(2), tool_call_id="k", name="query_kb")]
    text = ExtractiveSummarizer().summarize(messages)
    assert "id=chunk-0" in text and "file_id=file-1" in text and "kb_id=kb-main" in text


def test_extractive_merges_previous_summary() -> None:
    first = ExtractiveSummarizer().summarize(_conversation()[:2])
    second = ExtractiveSummarizer().summarize(
        [HumanMessage(content="Also always cite page numbers.")], previous_summary=first
    )
    assert "retention report for Q3" in second
    assert "always cite page numbers" in second
    assert second.count("## SESSION INTENT") == 1


def test_extractive_raises_on_nothing_to_summarize() -> None:
    with pytest.raises(SummarizerFailed):
        ExtractiveSummarizer().summarize([])


def test_extractive_bullets_carry_one_list_mark() -> None:
    """A user's own list lines become bullets once, not "- - item"."""
    messages = [
        HumanMessage(
            content="Please set this up:\n- Production access must stay read-only.\n* • Keep the audit log."
        )
    ]
    text = ExtractiveSummarizer().summarize(messages)
    assert "- Production access must stay read-only." in text
    assert "- - " not in text and "- * " not in text and "- • " not in text
    again = ExtractiveSummarizer().summarize([HumanMessage(content="ok")], previous_summary=text)
    assert "- - " not in again and "Production access must stay read-only." in again
