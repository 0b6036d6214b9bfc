"""The evidence ledger of real compressions: every item in one state, at the right file and line.

Every thread here is compressed through the engine (``prepare_summary`` + ``write_summary``)
into a temporary workdir, with the extractive summarizer unless a test needs a summary that
names nothing (``CountingSummarizer``). Oracles are computed from the payloads the tests
build (json.loads of their own records), not with the ledger's parsers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tests.compression.builders import CountingSummarizer, kb_payload
from tests.compression.previews.test_preview import _sweep_payloads, _yuxi_records
from tests.compression.test_cutoff import message_sequences
from tests.fixtures.profiles import examples
from yuxi_dash.agents import DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS
from yuxi_dash.compression import (
    CompressionOutcome,
    ExtractiveSummarizer,
    Summarizer,
    ThreadContextState,
    message_text,
    model_messages,
    prepare_summary,
    write_summary,
)
from yuxi_dash.compression.evidence_index import evidence_index_text, parse_evidence_index
from yuxi_dash.compression.evidence_ledger import (
    KINDS,
    STATES,
    Ledger,
    LedgerItem,
    build_ledger,
)
from yuxi_dash.compression.previews.salvage import parse_records_text, shared_parses
from yuxi_dash.errors import SummarizerFailed
from yuxi_dash.files.workdir import Workdir


@pytest.fixture
def wd(tmp_path: Path) -> Workdir:
    workdir = Workdir(tmp_path / "workdir")
    workdir.initialize()
    return workdir


def compress(
    messages: list[BaseMessage],
    workdir: Workdir,
    *,
    keep: int = 4,
    summarizer: Summarizer | None = None,
    evidence_budget: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> tuple[ThreadContextState, CompressionOutcome, Ledger]:
    """``evidence_budget=0``: the summary keeps no cited item in view (only the index's path)."""
    state = ThreadContextState("t-ledger", messages)
    prepared = prepare_summary(
        state, workdir=workdir, summarizer=summarizer or ExtractiveSummarizer(), keep_messages=keep
    )
    outcome = write_summary(
        prepared, workdir=workdir, summary_evidence_budget_tokens=evidence_budget
    )
    written = [saved.path for _call, _tool, saved in outcome.saved_files]
    return state, outcome, build_ledger(state, outcome.state, workdir, written=written)


def view_of(outcome: CompressionOutcome) -> str:
    """The next model input's text: message texts and tool-call arguments."""
    parts = []
    for message in model_messages(outcome.state):
        parts.append(message_text(message))
        if isinstance(message, AIMessage):
            parts.extend(json.dumps(c["args"], ensure_ascii=False) for c in message.tool_calls)
    return "\n".join(parts)


def in_text(text: str, value: str) -> bool:
    """The value as written or JSON-escaped (both ways) in ``text``, not inside a longer
    word (no letter, digit, ``_`` or ``-`` beside an edge that is one)."""
    for form in {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}:
        before = r"(?<![\w-])" if re.match(r"[\w-]", form[0]) else ""
        after = r"(?![\w-])" if re.match(r"[\w-]", form[-1]) else ""
        if re.search(before + re.escape(form) + after, text):
            return True
    return False


def check_ledger(ledger: Ledger, outcome: CompressionOutcome, workdir: Workdir) -> None:
    """Every item in exactly one state; the counts add up; each state is where it says."""
    keys = [(item.kind, item.value) for item in ledger.items]
    assert len(keys) == len(set(keys))  # one item per (kind, value)
    counts = ledger.counts()
    assert set(counts) == set(KINDS) and all(set(row) == set(STATES) for row in counts.values())
    assert sum(sum(row.values()) for row in counts.values()) == len(ledger.items)
    assert ledger.state_counts() == {s: sum(row[s] for row in counts.values()) for s in STATES}
    json.dumps(ledger.to_dict())  # printable as it is
    view = view_of(outcome)
    for item in ledger.items:
        assert item.state in STATES
        assert (item.file is not None) == (item.line is not None) == (item.state == "recoverable")
        if item.state == "recoverable":
            assert item.file is not None and item.line is not None
            lines = workdir.read_text(item.file).split("\n")
            assert in_text(lines[item.line - 1], item.value) or (
                item.line == 1 and len(lines) == 1  # a one-line file its record was read from
            ), item
        if item.kind != "saved_result" or item.state != "lost":  # a saved result: its file too
            assert (item.state == "visible") == in_text(view, item.value), item


def by_value(ledger: Ledger) -> dict[str, LedgerItem]:
    return {item.value: item for item in ledger.items}


def research_thread(tool: str, content: Any, cite: str, *, filler: int = 6) -> list[BaseMessage]:
    """A user question naming a url, one tool call and its result, an answer citing ``cite``,
    then ``filler`` short turns (kept)."""
    messages: list[BaseMessage] = [
        HumanMessage("What is our retention policy? Start from https://example.com/brief."),
        AIMessage("", tool_calls=[{"name": tool, "args": {"query": "retention"}, "id": "c1"}]),
        ToolMessage(content=content, tool_call_id="c1", name=tool),
        AIMessage(f"Retention is 30 days. Sources: [{cite}]"),
    ]
    for turn in range(filler):
        messages.append(HumanMessage(f"Follow-up {turn}?"))
        messages.append(AIMessage(f"Reply {turn}."))
    return messages


# -- a thread where the assistant cites records ------------------------------------------
def test_a_cited_thread_every_item_in_one_state(wd: Workdir) -> None:
    records = json.loads(kb_payload(20))["results"]
    web = [
        {"title": f"Page {n}", "url": f"https://example.com/page/{n}", "snippet": "s " * 40}
        for n in range(14)
    ]
    messages = research_thread("query_kb", kb_payload(20), "chunk-13")
    messages[4:4] = [
        AIMessage("", tool_calls=[{"name": "web_search", "args": {"q": "x"}, "id": "c2"}]),
        ToolMessage(content=json.dumps({"results": web}), tool_call_id="c2", name="web_search"),
        AIMessage("Also https://example.com/page/11 and [chunk-1]."),
        AIMessage(
            "",
            tool_calls=[
                {
                    "name": "write_file",
                    "args": {"file_path": "/out/r.md", "content": "x"},
                    "id": "w",
                },
                {"name": "get_run", "args": {"run_id": "run-42"}, "id": "g"},
            ],
        ),
        ToolMessage(content="ok", tool_call_id="w", name="write_file"),
        ToolMessage(content='{"thread_id": "th-7", "status": "done"}', tool_call_id="g"),
    ]
    state, outcome, ledger = compress(messages, wd)
    assert outcome.status == "completed" and ledger.cutoff == outcome.state.visible_start
    check_ledger(ledger, outcome, wd)
    items = by_value(ledger)
    kinds = {item.value: item.kind for item in ledger.items}
    assert {r["id"] for r in records} <= {v for v, k in kinds.items() if k == "kb_record"}
    assert {w["url"] for w in web} <= {v for v, k in kinds.items() if k == "web_result"}
    assert kinds["/out/r.md"] == "file" and kinds["run-42"] == "run" and kinds["th-7"] == "thread"
    assert items["chunk-13"].cited and items["chunk-1"].cited and not items["chunk-10"].cited
    assert items["https://example.com/page/11"].cited
    assert items["https://example.com/brief"].named_by_user  # the sentence's dot is not in it
    assert items["chunk-3"].source == "docs/doc-3.pdf" and items["chunk-3"].chunk_index == 3
    assert items["chunk-3"].message_index == 2 and items["chunk-3"].title is None
    assert items["https://example.com/page/4"].title == "Page 4"
    saved = [item for item in ledger.items if item.kind == "saved_result"]
    assert len(saved) == 2 and all(item.sha256 for item in saved)
    assert ledger.state_counts()["lost"] == 0  # every file is there
    assert ledger.history_file == outcome.file_path
    assert ledger.summarized_messages == outcome.compressed_messages


def test_an_item_in_the_kept_window_is_visible(wd: Workdir) -> None:
    messages = research_thread("query_kb", kb_payload(20), "chunk-13")
    messages.insert(-1, AIMessage("As said, [chunk-17] applies."))  # kept: the last 4
    _state, outcome, ledger = compress(
        messages, wd, summarizer=CountingSummarizer(), evidence_budget=0
    )
    check_ledger(ledger, outcome, wd)
    items = by_value(ledger)
    assert items["chunk-17"].state == "visible" and items["chunk-17"].file is None
    assert items["chunk-13"].state == "recoverable"  # cited, but the summary names nothing
    assert items["chunk-13"].cited and items["chunk-13"].file == items["chunk-0"].file


def test_an_item_only_in_the_history_file_is_recoverable_at_its_line(wd: Workdir) -> None:
    small = '{"run_id": "run-0042", "thread_id": "th-0007"}'  # under the limit: not offloaded
    messages = research_thread("get_run", small, "run-0042")
    _state, outcome, ledger = compress(messages, wd, evidence_budget=0)  # it names no run id
    check_ledger(ledger, outcome, wd)
    run = by_value(ledger)["run-0042"]
    assert run.kind == "run" and run.state == "recoverable" and run.cited
    assert run.file == outcome.file_path
    history = wd.read_text(outcome.file_path).split("\n")
    assert run.line is not None and history[run.line - 1] == small  # the result's own line
    assert "run-0042" not in "\n".join(history[: run.line - 1])


def test_deleting_the_evidence_bearing_file_makes_its_items_lost(wd: Workdir) -> None:
    messages = research_thread("query_kb", kb_payload(20), "chunk-13")
    messages[1:1] = [
        AIMessage("", tool_calls=[{"name": "get_run", "args": {}, "id": "g"}]),
        ToolMessage(content='{"run_id": "run-9"}', tool_call_id="g", name="get_run"),
    ]
    state, outcome, ledger = compress(messages, wd, evidence_budget=0)
    check_ledger(ledger, outcome, wd)
    (saved,) = [item for item in ledger.items if item.kind == "saved_result"]
    from_file = {i.value for i in ledger.items if i.file == saved.value}
    assert "chunk-13" in from_file and ledger.state_counts()["lost"] == 0
    assert wd.remove_file(saved.value)
    after = build_ledger(state, outcome.state, wd)
    check_ledger(after, outcome, wd)
    items = by_value(after)
    assert items[saved.value].state == "lost"
    history = wd.read_text(outcome.file_path)
    for value in from_file:  # recoverable from the history (a shown record) or lost
        assert items[value].state == ("recoverable" if in_text(history, value) else "lost")
    assert items["chunk-13"].state == "recoverable"  # the answer citing it is in the history
    assert items["chunk-19"].state == "lost"  # only ever in the deleted file
    assert wd.remove_file(outcome.file_path)
    gone = by_value(build_ledger(state, outcome.state, wd))
    assert gone["run-9"].state == "lost" and gone["chunk-13"].state == "lost"
    assert all(item.state != "recoverable" for item in gone.values())


def test_a_tool_result_file_nothing_points_to_does_not_count(wd: Workdir) -> None:
    """The summary names nothing; with the history gone, the result's file is still on
    disk but no saved pointer leads to it: its items are lost."""
    messages = research_thread("query_kb", kb_payload(20), "chunk-13")
    state, outcome, ledger = compress(
        messages, wd, summarizer=CountingSummarizer(), evidence_budget=0
    )
    assert by_value(ledger)["chunk-19"].state == "recoverable"
    assert wd.remove_file(outcome.file_path)
    after = build_ledger(state, outcome.state, wd)
    (saved,) = [item for item in after.items if item.kind == "saved_result"]
    assert wd.has_file(saved.value)
    assert {item.state for item in after.items} == {"lost"}


def test_deleting_the_evidence_index_makes_its_items_lost(wd: Workdir) -> None:
    """An extra file the summary points to (the evidence index the engine saved) is searched
    after the history; with the history gone, what only the index names goes when it goes."""
    small = '{"run_id": "run-0042"}'
    messages = research_thread("get_run", small, "run-0042")
    state, outcome, ledger = compress(
        messages, wd, summarizer=CountingSummarizer(), evidence_budget=0
    )
    index_path = outcome.evidence_index
    assert index_path is not None and wd.read_text(index_path) == evidence_index_text(ledger)
    assert wd.remove_file(outcome.file_path)
    items = by_value(build_ledger(state, outcome.state, wd, extra_files=[index_path]))
    run = items["run-0042"]
    assert run.state == "recoverable" and run.file == index_path
    assert run.line is not None and "run-0042" in wd.read_text(index_path).split("\n")[run.line - 1]
    assert items["https://example.com/brief"].file == index_path
    assert wd.remove_file(index_path)
    gone = build_ledger(state, outcome.state, wd, extra_files=[index_path])
    assert {item.state for item in gone.items} == {"lost"}


def test_a_second_compression_covers_what_the_first_summarized(wd: Workdir) -> None:
    first = research_thread("query_kb", kb_payload(20), "chunk-13")
    _state, outcome, ledger = compress(first, wd)
    more = research_thread("web_search", json.dumps(_WEB), "https://example.com/page/3")
    before = ThreadContextState("t-ledger", [*outcome.state.messages, *more], outcome.state.summary)
    prepared = prepare_summary(
        before, workdir=wd, summarizer=ExtractiveSummarizer(), keep_messages=4
    )
    second = write_summary(prepared, workdir=wd)
    again = build_ledger(before, second.state, wd)
    check_ledger(again, second, wd)
    assert {i.value for i in ledger.items} < {i.value for i in again.items}  # the first part too
    items = by_value(again)
    assert items["chunk-19"].state == "recoverable" and items["chunk-19"].message_index == 2
    assert items["https://example.com/page/3"].cited and again.state_counts()["lost"] == 0
    saved = items["chunk-19"].file
    assert saved is not None and items[saved].kind == "saved_result"
    (wd.root / saved).write_text("changed")  # no longer its SHA-256: only its preview is read
    changed = by_value(build_ledger(before, second.state, wd))
    assert changed[saved].state == "lost" and "chunk-19" not in changed
    assert "chunk-0" in changed  # a record its preview shows


def test_a_link_in_place_of_a_saved_file_is_not_followed(wd: Workdir, tmp_path: Path) -> None:
    state, outcome, ledger = compress(research_thread("query_kb", kb_payload(20), "c"), wd)
    (saved,) = [item for item in ledger.items if item.kind == "saved_result"]
    outside = tmp_path / "outside.txt"
    outside.write_text(kb_payload(20))
    wd.remove_file(saved.value)
    (wd.root / saved.value).symlink_to(outside)
    items = by_value(build_ledger(state, outcome.state, wd))
    assert items[saved.value].state == "lost" and items["chunk-19"].state == "lost"


def test_inside_shared_parses_a_text_is_read_once_and_the_ledger_is_the_same(wd: Workdir) -> None:
    text = kb_payload(5)
    with shared_parses():
        first = parse_records_text(text)
        assert parse_records_text(text) is first  # the same object: read once
        assert parse_records_text("".join(list(text))) is not first  # an equal copy: read again
    assert parse_records_text(text) is not first and parse_records_text(text) == first
    messages = research_thread("query_kb", kb_payload(20), "chunk-13")
    with shared_parses():
        state, outcome, shared = compress(messages, wd)
    assert build_ledger(state, outcome.state, wd) == shared


# -- the design brief's preview cases -----------------------------------------------------
def _expected(payload: Any) -> set[str]:
    """Record ids / urls of a payload, read with json.loads."""
    document = json.loads(payload) if isinstance(payload, str) else payload
    records = document if isinstance(document, list) else document.get("results")
    if records is None:
        records = document["data"]["results"]
    return {str(r.get("id", r.get("url"))) for r in records if r.get("id", r.get("url"))}


def _blocks(text: str) -> list[str | dict[Any, Any]]:
    cuts = [0, 7, len(text) // 2, len(text) - 3, len(text)]
    return [{"type": "text", "text": text[a:b]} for a, b in zip(cuts, cuts[1:], strict=False)]


CUT = kb_payload(10)
CUT = CUT[: CUT.index("Body of chunk 6.") + 30]  # cut inside record 6: records 0-5 whole
_ENVELOPE = {"code": 0, "data": {"query": "q", "results": _yuxi_records(10, title_chars=15)}}
_WEB = [{"title": f"R {n}", "url": f"https://example.com/page/{n}", "snippet": "s " * 60}
        for n in range(12)]  # fmt: skip
PREVIEW_CASES: list[tuple[str, str, Any, set[str]]] = [
    *((f"sweep-{n}", tool, payload, _expected(payload))
      for n, (tool, payload) in enumerate(_sweep_payloads())),
    ("envelope", "query_kb", json.dumps(_ENVELOPE), _expected(_ENVELOPE)),
    ("web bare list", "web_search", json.dumps(_WEB), _expected(_WEB)),
    ("cut json", "query_kb", CUT, {f"chunk-{n}" for n in range(6)}),
    ("trailing text", "query_kb", kb_payload(30) + "\n[12 more]", _expected(kb_payload(30))),
    ("python repr", "query_kb", repr(json.loads(kb_payload(12))), _expected(kb_payload(12))),
    ("mcp blocks", "mcp__kb__query_kb", _blocks(kb_payload(14)), _expected(kb_payload(14))),
    ("bad json", "query_kb", "{not json" + "x" * 3000, set()),
    ("no results key", "query_kb", json.dumps({"answer": "a", "pad": "p" * 3000}), set()),
]  # fmt: skip


@pytest.mark.parametrize(
    "tool,content,expected", [c[1:] for c in PREVIEW_CASES], ids=[c[0] for c in PREVIEW_CASES]
)
def test_the_preview_cases(wd: Workdir, tool: str, content: Any, expected: set[str]) -> None:
    cite = sorted(expected)[-1] if expected else "none"
    state, outcome, ledger = compress(research_thread(tool, content, cite), wd)
    check_ledger(ledger, outcome, wd)
    kinds = ("kb_record", "web_result")
    assert {i.value for i in ledger.items if i.kind in kinds and i.message_index == 2} == expected
    assert ledger.state_counts()["lost"] == 0
    if expected:
        assert by_value(ledger)[cite].cited
    (saved,) = [item for item in ledger.items if item.kind == "saved_result"]
    assert wd.remove_file(saved.value)
    after = build_ledger(state, outcome.state, wd)
    check_ledger(after, outcome, wd)
    assert by_value(after)[saved.value].state == "lost"
    assert all(item.file != saved.value for item in after.items)
    history, view = wd.read_text(outcome.file_path), view_of(outcome)
    for item in after.items:
        if item.state == "lost" and item.kind != "saved_result":
            assert not in_text(history, item.value) and not in_text(view, item.value)


# -- the evidence index -------------------------------------------------------------------
def test_the_evidence_index_has_one_line_per_item_with_where_it_lives(wd: Workdir) -> None:
    _state, outcome, ledger = compress(research_thread("query_kb", kb_payload(20), "chunk-13"), wd)
    text = evidence_index_text(ledger)
    rows = parse_evidence_index(text)
    assert text.startswith("# Evidence index: ") and text.endswith("\n")
    assert len(text.split("\n")) == len(ledger.items) + 2  # the comment, the items, the end
    assert [(kind, value) for kind, _w, _m, value in rows] == [
        (item.kind, item.value) for item in ledger.items
    ]
    for (_kind, where, marks, _value), item in zip(rows, ledger.items, strict=True):
        expected = {"visible": "in view", "lost": "lost"}.get(
            item.state, f"{item.file}:{item.line}"
        )
        assert where == expected
        assert ("cited" in marks) == item.cited and ("named_by_user" in marks) == item.named_by_user


@pytest.mark.parametrize(
    "value", ["plain-id", "tab\there", "line\nbreak", " padded ", '"quoted"', "sep\u2028x", "中文"]
)
def test_any_value_stays_on_its_line_and_reads_back(value: str) -> None:
    item = LedgerItem("kb_record", value, "lost", True, False, None, None, 0)
    ledger = Ledger((item, item), cutoff=3, summarized_messages=3, history_file=None)
    text = evidence_index_text(ledger)
    assert len(text.splitlines()) == 3
    assert parse_evidence_index(text) == [("kb_record", "lost", ("cited",), value)] * 2


def test_lines_that_are_not_items_are_skipped_when_read_back() -> None:
    text = 'note\nkb_record\tlost\t-\t"unclosed\nkb_record\tlost\t-\t7\n# x\tx\tx\tx\n'
    assert parse_evidence_index(text) == [("kb_record", "lost", (), "7")]
    empty = Ledger((), cutoff=0, summarized_messages=0, history_file=None)
    assert evidence_index_text(empty).startswith("# Evidence index: 0 items of the summarized no")


# -- any thread, any cut point -------------------------------------------------------------
@st.composite
def evidence_threads(draw: st.DrawFn) -> list[BaseMessage]:
    """``message_sequences`` with evidence: kb / web / run results (some over the limit),
    write_file calls, answers citing what came before and users naming urls. Every value is
    fixed-width, so none is part of another."""
    serial = iter(range(10_000))
    seen: list[str] = []
    out: list[BaseMessage] = []
    for message in draw(message_sequences()):
        if isinstance(message, ToolMessage):
            tool = draw(st.sampled_from(["query_kb", "web_search", "get_run", "run_command"]))
            body = draw(st.sampled_from([10, 400]))
            count = draw(st.integers(min_value=0, max_value=6))
            if tool == "query_kb":
                values = [f"kb-{next(serial):04d}" for _ in range(count)]
                rows = [{"id": v, "source": f"d/{v}.md", "content": "b" * body} for v in values]
            elif tool == "web_search":
                values = [f"https://example.com/r/{next(serial):04d}" for _ in range(count)]
                rows = [{"url": v, "title": "t", "snippet": "s" * body} for v in values]
            else:
                values = [f"run-{next(serial):04d}"] if tool == "get_run" else []
                rows = []
            seen.extend(values)
            content = (
                json.dumps({"results": rows})
                if rows or tool in ("query_kb", "web_search")
                else (json.dumps({"run_id": values[0]}) if tool == "get_run" else "ok")
            )
            message = message.model_copy(update={"content": content, "name": tool})
        elif isinstance(message, AIMessage) and message.tool_calls and draw(st.booleans()):
            path = f"/notes/{next(serial):04d}.md"
            call = {**message.tool_calls[0], "name": "write_file", "args": {"file_path": path}}
            message = message.model_copy(update={"tool_calls": [call, *message.tool_calls[1:]]})
        elif isinstance(message, AIMessage) and seen:
            cited = draw(st.lists(st.sampled_from(seen), max_size=3))
            content = f"{message.content} Sources: " + ", ".join(f"[{c}]" for c in cited)
            message = message.model_copy(update={"content": content})
        elif isinstance(message, HumanMessage) and draw(st.booleans()):
            message = HumanMessage(
                f"{message.content} see https://example.com/u/{next(serial):04d}."
            )
        out.append(message)
    return out


@settings(max_examples=examples(80))
@given(evidence_threads(), st.integers(min_value=0, max_value=8))
def test_any_thread_any_cut_counts_add_up_and_visible_is_what_the_view_holds(
    tmp_path_factory: pytest.TempPathFactory, messages: list[BaseMessage], keep: int
) -> None:
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    workdir.initialize()
    try:
        _state, outcome, ledger = compress(messages, workdir, keep=keep)
    except SummarizerFailed:  # the extractive summary found nothing to say: no compression
        event("no summary")
        return
    check_ledger(ledger, outcome, workdir)
    event(f"{outcome.status}, states: {sorted(s for s, n in ledger.state_counts().items() if n)}")
    if outcome.status == "no_op":
        assert ledger.items == () and ledger.cutoff == 0
        return
    assert ledger.state_counts()["lost"] == 0  # nothing deleted: everything is somewhere
    summarized = messages[: ledger.cutoff]
    ai_text = "\n".join(message_text(m) for m in summarized if isinstance(m, AIMessage))
    human_text = "\n".join(message_text(m) for m in summarized if isinstance(m, HumanMessage))
    for item in ledger.items:
        assert item.cited == (item.value in ai_text)
        assert item.named_by_user == (item.value in human_text)
    assert _values_in(summarized) == {
        item.value for item in ledger.items if item.kind != "saved_result"
    }


def _values_in(messages: Sequence[BaseMessage]) -> set[str]:
    """Every fixed-width value the strategy put in these messages."""
    text = "\n".join(
        message_text(m) + json.dumps([c["args"] for c in getattr(m, "tool_calls", [])])
        for m in messages
    )
    pattern = r"kb-\d{4}|https://example\.com/[ru]/\d{4}|run-\d{4}|/notes/\d{4}\.md"
    return set(re.findall(pattern, text))
