"""The saved-result header: written by `saved_result_header`, read back by `parse_saved_result`."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from tests.compression.builders import kb_payload, tool_exchange
from tests.fixtures.profiles import examples
from yuxi_dash.compression import (
    SAVED_RESULT_MARKER,
    compact_messages,
    is_saved_result,
    parse_saved_result,
    tool_result_preview,
)
from yuxi_dash.files.workdir import Workdir


def test_what_the_writer_writes_the_reader_reads(workdir: Workdir) -> None:
    content = kb_payload(12)
    [_call, replaced] = compact_messages(tool_exchange(1, "query_kb", content), workdir)
    assert isinstance(replaced, ToolMessage) and is_saved_result(replaced)
    saved = parse_saved_result(replaced.content)
    assert saved is not None
    raw = (workdir.root / saved.path).read_bytes()
    assert raw == content.encode("utf-8")
    assert saved.sha256 == hashlib.sha256(raw).hexdigest()
    assert saved.tool == "query_kb"
    assert saved.approx_tokens == -(-len(content) // 4)
    assert saved.approx_tokens_text == str(saved.approx_tokens)
    assert saved.preview == tool_result_preview("query_kb", content, 300)
    assert saved.note == (
        f"[Truncated {len(content) - len(saved.preview)} chars. "
        "Read the full output from the saved file.]"
    )


@settings(max_examples=examples(40))
@given(st.text(min_size=1300, max_size=3000))
def test_any_offloaded_text_round_trips_through_the_header(tmp_path_factory, text: str) -> None:
    workdir = Workdir(tmp_path_factory.mktemp("wd"))
    [_call, replaced] = compact_messages(tool_exchange(1, "run", text), workdir)
    saved = parse_saved_result(replaced.content)
    assert saved is not None
    assert workdir.verify(saved.path, saved.sha256) == "ok"
    assert saved.approx_tokens == -(-len(text) // 4)
    assert saved.note.startswith("[Truncated ")
    assert saved.preview + "\n" + saved.note == replaced.content.partition("Output preview:\n")[2]


def test_not_a_saved_result_is_none() -> None:
    assert parse_saved_result("plain tool output") is None
    assert parse_saved_result(" " + SAVED_RESULT_MARKER) is None
    assert parse_saved_result([{"type": "text", "text": SAVED_RESULT_MARKER}]) is None
    assert parse_saved_result(None) is None


def test_a_forged_header_is_read_as_written_and_hides_nothing() -> None:
    """A tool can print the marker itself: every field stays its literal text."""
    forged = f"{SAVED_RESULT_MARKER}\nTool: x\nApprox tokens: ²³\nrm -rf /\nSHA-256: nope"
    saved = parse_saved_result(forged)
    assert saved is not None
    assert (saved.tool, saved.approx_tokens_text) == ("x", "²³")
    assert (saved.sha256, saved.path) == ("nope", "")  # a missing field is ""
    assert saved.approx_tokens is None  # not a number: no figure is made up from it
    # no "Output preview:" line: everything after the marker is the preview, nothing is dropped
    assert saved.preview == forged.partition("\n")[2] and saved.note == ""
    bare = parse_saved_result(SAVED_RESULT_MARKER)
    assert bare is not None and (bare.tool, bare.preview, bare.note) == ("", "", "")
