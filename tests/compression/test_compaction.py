"""Offloading large tool results and truncating long file-write arguments."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.compression.builders import kb_payload, tool_exchange
from tests.fixtures.profiles import examples
from yuxi_dash.compression import (
    ARG_TRUNCATION_MARKER,
    compact_messages,
    is_saved_result,
    parse_saved_result,
    tool_result_preview,
)
from yuxi_dash.compression.compaction import offload_tool_results
from yuxi_dash.files.workdir import Workdir


def test_large_result_is_offloaded_with_exact_header(workdir: Workdir) -> None:
    content = "line of output\n" * 400  # 6000 chars -> 1500 tokens
    messages = [HumanMessage(content="run it"), *tool_exchange(1, "run_command", content)]
    compacted = compact_messages(messages, workdir)
    replaced = compacted[2]
    assert isinstance(replaced, ToolMessage)
    assert replaced.tool_call_id == "call-1" and replaced.name == "run_command"
    sha = hashlib.sha256(content.encode()).hexdigest()
    path = f"outputs/large_tool_results/run_command-{sha[:16]}.txt"
    preview = tool_result_preview("run_command", content, 300)
    lines = replaced.content.split("\n")
    assert lines[:8] == [
        "[Tool result saved]",
        "Tool: run_command",
        "Approx tokens: 1500",
        f"SHA-256: {sha}",
        f"Full output path: {path}",
        "",
        "Output preview:",
        "[HEAD]",
    ]
    assert replaced.content.endswith(
        f"\n[Truncated {len(content) - len(preview)} chars. Read the full output from the saved file.]"
    )
    assert preview in replaced.content
    # The file is the truth: its SHA-256 is the header's, its bytes the original's.
    raw = (workdir.root / path).read_bytes()
    assert raw == content.encode("utf-8")
    assert hashlib.sha256(raw).hexdigest() == parse_saved_result(replaced.content).sha256
    # Input messages are untouched.
    assert messages[2].content == content


@settings(max_examples=examples(60))
@given(
    st.sampled_from(["run_command", "query_kb", "web_search"]),
    st.integers(min_value=1201, max_value=9000),
    st.sampled_from(["a", "é", "中", "\n", "😀"]),
)
def test_the_header_states_the_original_length(
    tmp_path_factory: pytest.TempPathFactory, tool: str, chars: int, unit: str
) -> None:
    """`SavedResult.chars` (the tool-results index's figure) is the original's length
    whenever the preview is shorter than it, and never below it otherwise."""
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    workdir.initialize()
    if tool == "query_kb":
        content = kb_payload(max(1, chars // 400))
    else:
        content = (unit * chars)[:chars]
    messages = list(tool_exchange(1, tool, content))
    offloaded, saved = offload_tool_results(messages, workdir)
    header = parse_saved_result(offloaded[1].content)
    assert saved and header is not None
    if len(header.preview) < len(content):
        assert header.chars == len(content) == saved[0][2].chars
    else:
        assert len(content) <= header.chars <= 4 * (header.approx_tokens or 0)


def test_a_header_without_a_count_gives_an_upper_bound() -> None:
    forged = "[Tool result saved]\nTool: x\nApprox tokens: 400\n\nOutput preview:\nabc"
    header = parse_saved_result(forged)
    assert header is not None and header.note == "" and header.chars == 3
    cut = forged + "\n[Truncated 1597 chars. Read the full output from the saved file.]"
    assert parse_saved_result(cut).chars == 1600  # type: ignore[union-attr]


def test_threshold_is_ceil_chars_over_4_greater_than_limit(workdir: Workdir) -> None:
    at_limit = [*tool_exchange(1, "run", "a" * 1200)]  # exactly 300 tokens: stays
    over = [*tool_exchange(2, "run", "a" * 1201)]  # ceil(1201/4)=301: offloaded
    assert compact_messages(at_limit, workdir)[1].content == "a" * 1200
    assert is_saved_result(compact_messages(over, workdir)[1])
    assert is_saved_result(compact_messages(over, workdir, tool_result_token_limit=100)[1])
    assert compact_messages(over, workdir, tool_result_token_limit=400)[1].content == "a" * 1201


def test_same_content_twice_is_one_file_and_saved_messages_are_skipped(workdir: Workdir) -> None:
    content = "same " * 2000
    messages = [*tool_exchange(1, "run", content), *tool_exchange(2, "run", content)]
    compacted, saved = offload_tool_results(messages, workdir)
    assert len(saved) == 2
    assert saved[0][2].path == saved[1][2].path
    assert len(list((workdir.root / "outputs/large_tool_results").iterdir())) == 1
    again, saved_again = offload_tool_results(compacted, workdir)
    assert saved_again == []
    assert [m.content for m in again] == [m.content for m in compacted]


@pytest.mark.parametrize(("tool", "content"), [("run", "z" * 5000), ("query_kb", kb_payload(20))])
def test_write_failure_leaves_message_exactly_as_it_was(
    tmp_path: Path, tool: str, content: str
) -> None:
    """A failed write replaces nothing: the message keeps its content, no preview is made."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("file")
    messages = [*tool_exchange(1, tool, content)]
    compacted = compact_messages(messages, Workdir(blocker))
    assert compacted[1] == messages[1]
    assert compacted[1].content == content
    assert blocker.read_text() == "file"


def test_one_failed_write_does_not_stop_the_others(tmp_path: Path, monkeypatch) -> None:
    workdir = Workdir(tmp_path / "wd")
    workdir.initialize()
    real_write = Workdir.write_prepared

    def flaky(self: Workdir, saved, data: bytes) -> None:
        if data.startswith(b"fail"):
            raise OSError("disk full")
        real_write(self, saved, data)

    monkeypatch.setattr(Workdir, "write_prepared", flaky)
    for copies in (1, 3):
        messages = []
        for n in range(copies):
            messages += tool_exchange(2 * n, "run", f"fail{n}" + "x" * 5000)
            messages += tool_exchange(2 * n + 1, "run", f"good{n}" + "y" * 5000)
        compacted = compact_messages(messages, workdir)
        for n in range(copies):
            assert compacted[4 * n + 1] == messages[4 * n + 1]
            assert is_saved_result(compacted[4 * n + 3])
    assert not any(p.read_bytes().startswith(b"fail") for p in workdir.root.rglob("*.txt"))


def test_missing_workdir_leaves_messages_unchanged() -> None:
    messages = [*tool_exchange(1, "query_kb", kb_payload(20))]
    compacted = compact_messages(messages, None)
    assert compacted == messages


def test_tool_name_falls_back_to_the_tool_call(workdir: Workdir) -> None:
    messages = [
        AIMessage(content="", tool_calls=[{"name": "query_kb", "args": {}, "id": "k1"}]),
        ToolMessage(content=kb_payload(12), tool_call_id="k1"),
    ]
    compacted = compact_messages(messages, workdir)
    header = parse_saved_result(compacted[1].content)
    assert header.tool == "query_kb"
    assert header.path.startswith("outputs/large_tool_results/query_kb-")
    assert '"kind":"knowledge_base"' in compacted[1].content


def test_write_file_args_truncated_in_view_only(workdir: Workdir) -> None:
    long_text = "0123456789abcdefghij" + "k" * 3000
    ai = AIMessage(
        content="writing",
        tool_calls=[
            {"name": "write_file", "args": {"path": "a.py", "content": long_text}, "id": "w1"},
            {"name": "edit_file", "args": {"old": "x" * 2000, "new": "y" * 2001}, "id": "w2"},
            {"name": "run_command", "args": {"cmd": "z" * 5000}, "id": "w3"},
        ],
    )
    compacted = compact_messages([ai], workdir)
    calls = compacted[0].tool_calls
    assert calls[0]["args"]["content"] == "0123456789abcdefghij" + ARG_TRUNCATION_MARKER
    assert ARG_TRUNCATION_MARKER == "...(argument truncated for context view)"
    assert calls[0]["args"]["path"] == "a.py"
    assert calls[1]["args"]["old"] == "x" * 2000  # exactly 2000 is not > 2000
    assert calls[1]["args"]["new"] == "y" * 20 + ARG_TRUNCATION_MARKER
    assert calls[2]["args"]["cmd"] == "z" * 5000  # other tools untouched
    assert ai.tool_calls[0]["args"]["content"] == long_text  # stored message untouched


def test_multibyte_result_round_trips_byte_for_byte(workdir: Workdir) -> None:
    content = "第一行：结果 🙂\r\n" * 300 + "e\u0301 👨\u200d👩\u200d👧 🇨🇳\n" * 100
    compacted = compact_messages([*tool_exchange(1, "run", content)], workdir)
    header = parse_saved_result(compacted[1].content)
    raw = (workdir.root / header.path).read_bytes()
    assert raw == content.encode("utf-8")
    assert hashlib.sha256(raw).hexdigest() == header.sha256
    assert workdir.read_text(header.path) == content
    compacted[1].content.encode("utf-8")  # the preview cut no character in half


def test_text_block_content_is_offloaded_as_its_joined_text(workdir: Workdir) -> None:
    """MCP-style results: a list of text blocks is saved as its text, recoverable byte for byte."""
    blocks = [
        {"type": "text", "text": "第一部分 " * 400},
        "plain part\n",
        {"type": "text", "text": "end"},
    ]
    text = "第一部分 " * 400 + "plain part\n" + "end"
    message = ToolMessage(content=blocks, tool_call_id="c", name="mcp_search")
    [replaced] = compact_messages([message], workdir)
    assert is_saved_result(replaced)
    header = parse_saved_result(replaced.content)
    raw = (workdir.root / header.path).read_bytes()
    assert raw == text.encode("utf-8")
    assert header.sha256 == hashlib.sha256(raw).hexdigest()
    assert header.approx_tokens_text == str(-(-len(text) // 4))
    assert message.content == blocks  # the input is untouched


def test_content_with_a_non_text_block_is_left_alone(workdir: Workdir) -> None:
    blocks = [
        {"type": "text", "text": "x" * 5000},
        {"type": "image", "source_type": "base64", "data": "aGk=", "mime_type": "image/png"},
    ]
    message = ToolMessage(content=blocks, tool_call_id="c", name="run")
    assert compact_messages([message], workdir) == [message]
    assert not any((workdir.root / "outputs" / "large_tool_results").glob("*"))


def test_short_text_blocks_stay(workdir: Workdir) -> None:
    message = ToolMessage(content=[{"type": "text", "text": "ok"}], tool_call_id="c", name="run")
    assert compact_messages([message], workdir) == [message]


@settings(max_examples=examples(60))
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["query_kb", "web_search", "run_command", "read_file"]),
            st.text(min_size=0, max_size=700),
            st.integers(min_value=0, max_value=6),
        ),
        max_size=6,
    ),
    st.integers(min_value=5, max_value=80),
)
def test_every_offload_is_recoverable_and_nothing_else_changes(
    tmp_path_factory, results: list[tuple[str, str, int]], limit: int
) -> None:
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    messages = []
    for index, (tool, text, repeat) in enumerate(results):
        messages += tool_exchange(index, tool, text * repeat)
    compacted = compact_messages(messages, workdir, tool_result_token_limit=limit)
    assert len(compacted) == len(messages)
    for before, after in zip(messages, compacted, strict=True):
        if not isinstance(before, ToolMessage):
            assert after == before
            continue
        over = -(-len(before.content) // 4) > limit
        assert is_saved_result(after) == over
        assert after.tool_call_id == before.tool_call_id and after.name == before.name
        if not over:
            assert after == before
            continue
        header = parse_saved_result(after.content)
        raw = (workdir.root / header.path).read_bytes()
        assert raw == before.content.encode("utf-8", "surrogatepass")
        assert hashlib.sha256(raw).hexdigest() == header.sha256
        assert header.approx_tokens_text == str(-(-len(before.content) // 4))


_FSIZE_LIMITED_COMPACTION = """
import json, resource, signal, sys
from tests.compression.builders import tool_exchange
from yuxi_dash.compression import compact_messages, is_saved_result
from yuxi_dash.files.workdir import Workdir
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an over-size write fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000))
messages = [*tool_exchange(1, "run", "b" * 5000), *tool_exchange(2, "run", "s" * 2000)]
compacted = compact_messages(messages, Workdir(sys.argv[1]), tool_result_token_limit=100)
print(json.dumps({
    "big_kept": compacted[1] == messages[1] and compacted[1].content == "b" * 5000,
    "small_saved": is_saved_result(compacted[3]),
}))
"""


def test_write_cut_short_keeps_that_message_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """A real half-done write (file-size limit) keeps the message as it was, writes no
    partial file under any name, and the next result is still offloaded."""
    import json
    import subprocess
    import sys

    root = tmp_path / "wd"
    Workdir(root).initialize()
    run = subprocess.run(
        [sys.executable, "-c", _FSIZE_LIMITED_COMPACTION, str(root)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent.parent,
    )
    assert json.loads(run.stdout) == {"big_kept": True, "small_saved": True}
    files = [p.read_bytes() for p in (root / "outputs/large_tool_results").iterdir()]
    assert files == [b"s" * 2000]


def test_a_saved_message_is_its_original_with_the_header_as_content(workdir: Workdir) -> None:
    """Everything the message carries but its content stays: ids, name, artifact, extra
    fields, status; the original is left as it was."""
    original = ToolMessage(
        content=kb_payload(20),
        tool_call_id="c2",
        name="query_kb",
        id="m-2",
        artifact={"raw": [1, 2]},
        status="error",
        additional_kwargs={"k": {"v": 1}},
        response_metadata={"latency": 0.5},
        custom_extra="kept",
    )
    (saved,), _records = offload_tool_results([original], workdir)
    assert isinstance(saved, ToolMessage) and is_saved_result(saved)
    assert saved == original.model_copy(update={"content": saved.content})
    assert saved.model_dump(exclude={"content"}) == original.model_dump(exclude={"content"})
    assert original.content == kb_payload(20)
