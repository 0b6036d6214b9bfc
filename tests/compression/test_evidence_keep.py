"""Summaries that keep what was cited (issue 39 item 3): the engine's kept evidence and index.

Threads here cite their evidence as an assistant does ("Sources: [chunk-t2-003], https://…").
Each is compressed through the engine into a temporary workdir; the oracle of "in view" is
the next model input's text (``model_messages``), read with the test's own pattern, and the
oracle of a ledger is ``build_ledger`` run on the new state with the index as an extra file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from tests.compression.agents import query_kb_tool, scripted_model
from tests.compression.builders import CountingSummarizer
from tests.compression.test_evidence_ledger import evidence_threads, in_text
from tests.compression.test_summarizers import GOOD_SUMMARY, StubChatServer
from tests.fixtures.profiles import examples
from yuxi_dash.compression import (
    CompressionOutcome,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    Summarizer,
    ThreadContextState,
    auto_compact,
    estimate_summary,
    force_summarize,
    message_text,
    model_messages,
    prepare_summary,
    write_summary,
)
from yuxi_dash.compression.evidence_index import parse_evidence_index
from yuxi_dash.compression.evidence_keep import (
    MORE,
    POINTER,
    named_evidence_index,
    text_tokens,
    without_kept_lines,
)
from yuxi_dash.compression.evidence_ledger import Ledger, LedgerItem, build_ledger, view_text
from yuxi_dash.compression.middleware import context_compression_middleware
from yuxi_dash.compression.state_format import context_state
from yuxi_dash.errors import SummarizerFailed, WorkdirUnavailable
from yuxi_dash.files.workdir import Workdir

POINTER_LINE = re.compile(r"^- " + re.escape(POINTER) + r"(\S+)$", re.MULTILINE)
MORE_LINE = re.compile(r"^- (\d[\d,]*) " + re.escape(MORE) + "$", re.MULTILINE)


@pytest.fixture
def wd(tmp_path: Path) -> Workdir:
    workdir = Workdir(tmp_path / "workdir")
    workdir.initialize()
    return workdir


def kb_records(topic: int, count: int = 15) -> str:
    records = [
        {
            "id": f"chunk-t{topic}-{n:03d}",
            "title": f"Policy {topic}.{n}",
            "source": f"policies/topic-{topic}.pdf",
            "score": 0.9 - n / 100,
            "content": f"Retention clause {topic}.{n}. " * 30,
            "metadata": {"chunk_index": n, "filename": f"topic-{topic}.pdf"},
        }
        for n in range(count)
    ]
    return json.dumps({"query": f"retention {topic}", "results": records})


def web_records(topic: int, count: int = 8) -> str:
    results = [
        {
            "title": f"News {topic}/{n}",
            "url": f"https://news.example/t{topic}/{n}",
            "snippet": "retention " * 40,
        }
        for n in range(count)
    ]
    return json.dumps({"results": results})


def cited_thread(
    topics: int = 3, *, cites: Sequence[int] = (3, 7), filler: int = 6
) -> list[BaseMessage]:
    """The user names a url; per topic a query_kb and a web_search, then an answer citing
    ``cites`` of its records and one url; ``filler`` short turns at the end (kept)."""
    messages: list[BaseMessage] = [
        HumanMessage("Compare our retention policies; https://intra.example/policy is the base.")
    ]
    for t in range(1, topics + 1):
        messages += [
            AIMessage("", tool_calls=[{"name": "query_kb", "args": {"q": f"t{t}"}, "id": f"k{t}"}]),
            ToolMessage(kb_records(t), tool_call_id=f"k{t}", name="query_kb"),
            AIMessage(
                "", tool_calls=[{"name": "web_search", "args": {"q": f"t{t}"}, "id": f"w{t}"}]
            ),
            ToolMessage(web_records(t), tool_call_id=f"w{t}", name="web_search"),
        ]
        ids = ", ".join(f"[chunk-t{t}-{n:03d}]" for n in cites)
        messages.append(
            AIMessage(f"Topic {t} keeps 30 days. Sources: {ids}, https://news.example/t{t}/2")
        )
    for turn in range(filler):
        messages += [HumanMessage(f"Follow-up {turn}?"), AIMessage(f"Reply {turn}.")]
    return messages


def compress(
    messages: list[BaseMessage],
    workdir: Workdir,
    *,
    summarizer: Summarizer | None = None,
    budget: int | None = None,
) -> tuple[ThreadContextState, CompressionOutcome]:
    state = ThreadContextState("t-keep", messages)
    prepared = prepare_summary(
        state, workdir=workdir, summarizer=summarizer or ExtractiveSummarizer(), keep_messages=4
    )
    extra = {} if budget is None else {"summary_evidence_budget_tokens": budget}
    return state, write_summary(prepared, workdir=workdir, **extra)


def summary_of(outcome: CompressionOutcome) -> str:
    assert outcome.state.summary is not None
    return message_text(outcome.state.summary.summary_message)


def view_of(state: ThreadContextState) -> str:
    return view_text(model_messages(state))


def wanted(ledger: Ledger) -> list[LedgerItem]:
    """The items a summary is to keep, in the order it keeps them."""
    cited = [item for item in ledger.items if item.cited]
    return cited + [item for item in ledger.items if item.named_by_user and not item.cited]


def block_lines(summary: str) -> list[str]:
    kept = set(without_kept_lines(summary).split("\n"))
    return [line for line in summary.split("\n") if line not in kept]


def test_every_cited_item_is_in_view_and_the_rest_is_in_the_index(wd: Workdir) -> None:
    state, outcome = compress(cited_thread(), wd)
    ledger, index = outcome.ledger, outcome.evidence_index
    assert ledger is not None and index is not None and outcome.file_path is not None
    cited = [item for item in ledger.items if item.cited]
    assert {i.value for i in cited} == {
        *(f"chunk-t{t}-{n:03d}" for t in (1, 2, 3) for n in (3, 7)),
        *(f"https://news.example/t{t}/2" for t in (1, 2, 3)),
    }
    view = view_of(outcome.state)
    for item in wanted(ledger):  # cited, and the url the user named
        assert item.state == "visible" and in_text(view, item.value), item
    assert ledger == build_ledger(state, outcome.state, wd, extra_files=[index])
    # beside the history file, named in the summary, one line per item with where it lives
    assert PurePosixPath(index).parent == PurePosixPath(outcome.file_path).parent
    assert POINTER_LINE.findall(summary_of(outcome)) == [index]
    assert named_evidence_index(summary_of(outcome)) == index
    rows = parse_evidence_index(wd.read_text(index))
    assert [(kind, value) for kind, _w, _m, value in rows] == [
        (i.kind, i.value) for i in ledger.items
    ]
    for (_kind, where, marks, value), item in zip(rows, ledger.items, strict=True):
        assert ("cited" in marks) == item.cited
        if item.state == "visible":
            assert where == "in view"
        else:
            assert item.state == "recoverable" and where == f"{item.file}:{item.line}"
            assert item.file is not None and item.line is not None
            lines = wd.read_text(item.file).split("\n")
            assert in_text(lines[item.line - 1], value) or len(lines) == 1
    assert ledger.state_counts()["lost"] == 0
    assert any(item.state == "recoverable" for item in ledger.items)  # not all in view


def test_deleting_the_index_loses_the_items_only_it_held(wd: Workdir) -> None:
    """The sweep removed the results' files: records beyond their previews are recoverable
    through the index alone; without the index they are lost, nothing else changes."""
    state, outcome = compress(cited_thread(), wd)
    index = outcome.evidence_index
    assert outcome.ledger is not None and index is not None
    saved = [i.value for i in outcome.ledger.items if i.kind == "saved_result"]
    assert len(saved) == 6 and all(wd.remove_file(path) for path in saved)
    with_index = build_ledger(state, outcome.state, wd, extra_files=[index])
    held = {item.value for item in with_index.items if item.file == index}
    assert {f"chunk-t{t}-014" for t in (1, 2, 3)} <= held  # beyond each preview
    assert {i.state for i in with_index.items if i.kind == "saved_result"} == {"lost"}
    assert wd.remove_file(index)
    without = build_ledger(state, outcome.state, wd, extra_files=[index])
    for before, after in zip(with_index.items, without.items, strict=True):
        assert after.state == ("lost" if before.value in held else before.state), after
    assert all(item.state == "visible" for item in without.items if item.cited)  # the summary


@pytest.mark.parametrize("budget", [0, 40, 120, 300, 600, 5000])
def test_the_budget_bounds_the_block_and_what_does_not_fit_is_counted(
    wd: Workdir, budget: int
) -> None:
    """A summary that names nothing itself: what is in view of the wanted items is the block's."""
    messages = cited_thread(4, cites=range(0, 15, 2))  # 8 records and a url per topic
    _state, outcome = compress(messages, wd, summarizer=CountingSummarizer(), budget=budget)
    ledger, kept = outcome.ledger, outcome.evidence
    assert ledger is not None and kept is not None and outcome.evidence_index is not None
    order = wanted(ledger)
    assert len(order) == 4 * 9 + 1
    lines = block_lines(summary_of(outcome))
    pointer = f"- {POINTER}{outcome.evidence_index}"
    assert lines[-1] == pointer
    size = text_tokens("\n".join(lines))
    fixed = text_tokens(pointer) + text_tokens(f"- {len(order)} {MORE}")  # always written
    assert size == kept.block_tokens and size <= max(budget, fixed)
    in_view = [item.value for item in order if item.state == "visible"]
    assert in_view == [item.value for item in kept.kept]  # in order, cited before named
    assert len(lines) == len(in_view) + (2 if kept.more else 1)
    assert kept.more == len(order) - len(in_view)
    more = MORE_LINE.findall(summary_of(outcome))
    assert more == ([f"{kept.more:,}"] if kept.more else [])
    for item in order:  # counted ones: in the index, recoverable at their line
        assert item.state == "visible" or (item.state == "recoverable" and item.file), item
    if budget >= 5000:
        assert kept.more == 0
    elif budget <= fixed:  # not even the pointer and the count fit: they alone are written
        assert in_view == []
    else:  # some fit, cited first
        assert 0 < len(in_view) < len(order) and in_view[0] == order[0].value


class Failing:
    name = "failing"
    extractive = False

    def summarize(self, messages: Any, *, previous_summary: str | None = None) -> str:
        raise RuntimeError("model down")


def written_files(workdir: Workdir) -> list[Path]:
    outputs = workdir.root / "outputs"
    return sorted(p for p in outputs.rglob("*") if p.is_file()) if outputs.exists() else []


def test_a_failed_summary_writes_no_index(wd: Workdir) -> None:
    state = ThreadContextState("t-fail", cited_thread())
    with pytest.raises(SummarizerFailed):
        force_summarize(state, workdir=wd, summarizer=Failing(), keep_messages=4)
    with pytest.raises(SummarizerFailed):
        auto_compact(state, workdir=wd, summarizer=Failing(), threshold_tokens=10, keep_messages=4)
    assert written_files(wd) == []


def test_a_failed_index_write_fails_the_compress(wd: Workdir) -> None:
    _state, first = compress(cited_thread(), wd)
    assert first.evidence_index is not None
    wd.remove_file(first.evidence_index)
    (wd.root / first.evidence_index).mkdir()  # a directory where the file is to go
    state = ThreadContextState("t-keep", cited_thread())
    with pytest.raises(WorkdirUnavailable, match="evidence index"):
        force_summarize(state, workdir=wd, summarizer=ExtractiveSummarizer(), keep_messages=4)


def test_a_summary_without_the_section_gets_one_and_names_nothing_twice(wd: Workdir) -> None:
    """A summarizer that drops every citation (as a model may): the engine adds the section."""
    state, outcome = compress(cited_thread(), wd, summarizer=CountingSummarizer())
    summary = summary_of(outcome)
    assert "## ARTIFACTS AND REFERENCES\n- Cited: record chunk-t1-003" in summary
    assert outcome.ledger is not None
    assert all(i.state == "visible" for i in outcome.ledger.items if i.cited)
    # a second compression: the first block is not carried, the new one covers both parts
    grown = [*outcome.state.messages, *cited_thread(1, cites=(11,), filler=4)[1:]]
    again = force_summarize(
        ThreadContextState(
            "t-keep", grown, outcome.state.summary, outcome.state.history_session_id
        ),
        workdir=wd,
        summarizer=ExtractiveSummarizer(),
        keep_messages=4,
    )
    text = summary_of(again)
    assert len(POINTER_LINE.findall(text)) == 1
    assert text.count("- Cited: record chunk-t1-003 ") == 1
    assert again.ledger is not None and again.evidence_index != outcome.evidence_index
    cited = {i.value for i in again.ledger.items if i.cited}
    assert {"chunk-t1-003", "chunk-t1-011"} <= cited
    assert all(i.state == "visible" for i in again.ledger.items if i.cited)


@pytest.fixture
def stub_server() -> Iterator[StubChatServer]:
    stub = StubChatServer()
    stub.thread.start()
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def test_a_model_summary_keeps_the_cited_items_too(
    wd: Workdir, stub_server: StubChatServer
) -> None:
    """An OpenAI-compatible model whose summary names none of them (over real HTTP)."""
    summarizer = OpenAICompatibleSummarizer(
        base_url=stub_server.base_url, model="stub", timeout_seconds=5, max_retries=0
    )
    _state, outcome = compress(cited_thread(), wd, summarizer=summarizer)
    summary = summary_of(outcome)
    assert "ARTIFACTS AND REFERENCES\n- Cited: record chunk-t1-003" in summary  # first in it
    assert summary.count("ARTIFACTS AND REFERENCES") == 1 and stub_server.requests
    assert outcome.ledger is not None
    assert all(i.state == "visible" for i in outcome.ledger.items if i.cited)
    assert GOOD_SUMMARY.split("\n")[0] in summary


def test_with_the_extractive_summarizer_the_estimate_is_still_the_result(wd: Workdir) -> None:
    state = ThreadContextState("t-keep", cited_thread())
    estimate = estimate_summary(state, summarizer=ExtractiveSummarizer(), keep_messages=4)
    outcome = force_summarize(state, workdir=wd, summarizer=ExtractiveSummarizer(), keep_messages=4)
    assert estimate.exact and estimate.after_tokens == outcome.after_tokens


# -- the middleware's automatic compressions ---------------------------------------------
def citing_script(turns: int) -> Iterator[AIMessage]:
    """Each turn: a query_kb call, then an answer citing two of its records and a url."""
    for turn in range(turns):
        yield AIMessage(
            "", tool_calls=[{"name": "query_kb", "args": {"q": f"q{turn}"}, "id": f"c{turn}"}]
        )
        yield AIMessage(
            f"Answer {turn}. Sources: [rec-q{turn}-002], [rec-q{turn}-009], "
            f"https://src.example/{turn}"
        )


def kb_result(q: str) -> str:
    records = [
        {
            "id": f"rec-{q}-{n:03d}",
            "title": f"{q} {n}",
            "source": f"kb/{q}.md",
            "content": f"Evidence {q}.{n}. " * 25,
        }
        for n in range(12)
    ]
    return json.dumps({"query": q, "results": records})


def test_the_middleware_keeps_the_cited_items_in_view(wd: Workdir) -> None:
    config: Any = {"configurable": {"thread_id": "t-mw-keep"}}
    model = scripted_model(citing_script(8))
    agent = create_agent(
        model,
        [query_kb_tool(kb_result)],
        middleware=context_compression_middleware(
            workdir=wd, summary_threshold_k=2, keep_messages=4, context_window=8000
        ),
        checkpointer=InMemorySaver(),
    )
    for turn in range(8):
        agent.invoke({"messages": [HumanMessage(f"question {turn}")]}, config)
    state = context_state("t-mw-keep", agent.get_state(config).values)
    assert state.summary is not None
    index = named_evidence_index(message_text(state.summary.summary_message))
    assert index is not None and wd.has_file(index)
    ledger = build_ledger(state, state, wd, extra_files=[index])
    cited = [item for item in ledger.items if item.cited]
    assert len(cited) >= 6 and all(item.state == "visible" for item in cited)
    assert ledger.state_counts()["lost"] == 0
    sent = "\n".join(message_text(m) for m in model.seen[-1])  # what the model was given
    assert all(in_text(sent, item.value) for item in cited)


def test_an_item_only_the_index_can_hold_is_recoverable_there(wd: Workdir) -> None:
    """A written path with a control character: the history writes tool calls as Python
    reprs (``\\x07``), which no form of the value matches; the index writes it as JSON."""
    path = "/out/bell\x07.md"
    messages = cited_thread(1)
    messages[1:1] = [
        AIMessage("", tool_calls=[{"name": "write_file", "args": {"file_path": path}, "id": "w"}]),
        ToolMessage("ok", tool_call_id="w", name="write_file"),
    ]
    state, outcome = compress(messages, wd, summarizer=CountingSummarizer())  # names nothing
    assert outcome.ledger is not None and outcome.evidence_index is not None
    (item,) = [i for i in outcome.ledger.items if i.value == path]
    assert item.kind == "file" and item.state == "recoverable"
    assert item.file == outcome.evidence_index and item.line is not None
    assert outcome.ledger == build_ledger(state, outcome.state, wd, extra_files=[item.file])
    index_line = wd.read_text(item.file).split("\n")[item.line - 1]
    assert index_line.endswith(json.dumps(path)) and index_line.split("\t")[1] == "lost"
    assert wd.remove_file(item.file)
    gone = build_ledger(state, outcome.state, wd, extra_files=[item.file])
    assert [i.state for i in gone.items if i.value == path] == ["lost"]


@settings(max_examples=examples(60))
@given(evidence_threads(), st.integers(min_value=0, max_value=8), st.sampled_from([0, 60, 600]))
def test_any_thread_the_outcome_ledger_is_the_ledger_of_the_new_state(
    tmp_path_factory: pytest.TempPathFactory, messages: list[BaseMessage], keep: int, budget: int
) -> None:
    """Built once and moved by the block and the index, it equals a fresh ``build_ledger``."""
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    workdir.initialize()
    state = ThreadContextState("t-any", messages)
    try:
        outcome = force_summarize(
            state,
            workdir=workdir,
            summarizer=ExtractiveSummarizer(),
            keep_messages=keep,
            summary_evidence_budget_tokens=budget,
        )
    except SummarizerFailed:
        event("no summary")
        return
    if outcome.status == "no_op":
        assert outcome.evidence is None and written_files(workdir) == []
        return
    ledger, index = outcome.ledger, outcome.evidence_index
    assert ledger is not None and (index is None) == (ledger.items == ())
    extra = [index] if index is not None else []
    assert ledger == build_ledger(state, outcome.state, workdir, extra_files=extra)
    assert ledger.state_counts()["lost"] == 0
    kept = outcome.evidence.kept if outcome.evidence is not None else ()
    assert all(item.state == "visible" for item in kept)
    event(f"kept {min(len(kept), 3)}+, more {bool(outcome.evidence and outcome.evidence.more)}")
