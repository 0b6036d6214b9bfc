"""Generic and structured previews: fields kept, records in order, clipping, multi-byte safety."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compression.builders import kb_payload
from tests.fixtures.profiles import examples
from yuxi_dash.compression import generic_preview, structured_preview, tool_result_preview
from yuxi_dash.compression.previews.clipping import (
    _splits_character,
    clip_head_tail,
    cut_end,
    cut_start,
)


def test_generic_preview_head_middle_tail_proportions() -> None:
    text = "".join(f"{n:05d}" for n in range(2000))  # 10,000 chars, every position distinct
    preview = generic_preview(text, 300)  # budget 1200: head 480, middle 240, tail 480
    assert preview.startswith("[HEAD]\n")
    head, rest = preview.removeprefix("[HEAD]\n").split("\n[MIDDLE]\n")
    middle, tail = rest.split("\n[TAIL]\n")
    assert head == text[:480]
    assert tail == text[-480:]
    assert len(middle) == 240
    start = text.index(middle)
    assert start == (len(text) - 240) // 2


def test_short_content_is_returned_whole() -> None:
    assert generic_preview("short", 300) == "short"
    assert tool_result_preview("run", "short", 300) == "short"


def _overlay(document: dict, record: dict) -> dict:
    """A record as the reader takes it: the header's ``common`` values overlaid."""
    common = document.get("common", {})
    merged = {**common, **record}
    if "metadata" in common or "metadata" in record:
        merged["metadata"] = {**common.get("metadata", {}), **record.get("metadata", {})}
    return merged


def test_records_that_do_not_fit_are_omitted_in_order() -> None:
    # 100 tokens: 400 chars, room for a few whole records only
    document = json.loads(tool_result_preview("query_kb", kb_payload(30), 100))
    shown = len(document["results"])
    assert 1 <= shown < 8
    assert [r["id"] for r in document["results"]] == [f"chunk-{n}" for n in range(shown)]
    assert document["omitted_results"] == 30 - shown


def test_web_search_fields_and_bare_list() -> None:
    records = [
        {
            "title": f"Result {n}",
            "url": f"https://example.com/page/{n}",
            "site_name": "Example",
            "publish_time": "2026-01-02",
            "score": 0.8,
            "snippet": "Snippet text " * 30,
            "raw_html": "<html>" * 100,
            "favicon": "https://example.com/favicon.ico",
        }
        for n in range(12)
    ]
    for payload in (json.dumps(records), json.dumps({"query": "q", "results": records})):
        document = json.loads(tool_result_preview("web_search", payload, 200))
        assert document["kind"] == "web_search" and document["result_count"] == 12
        first = _overlay(document, document["results"][0])  # score is common
        assert {"title", "url", "score"} <= set(first)  # the citation, whole
        assert set(first) <= {"title", "url", "site_name", "publish_time", "score", "snippet"}
        assert document["omitted_results"] == 12 - len(document["results"]) > 0
        assert "raw_html" not in json.dumps(document) and "favicon" not in json.dumps(document)


@pytest.mark.parametrize(
    "content",
    [
        '{"results": [1, 2, 3]}' + " " * 2000,
        "{not json" + "x" * 3000,
        json.dumps({"answer": "no results key", "pad": "p" * 3000}),
        json.dumps("just a string " * 300),
        "[" * 5000,
    ],
)
def test_bad_or_unexpected_json_falls_back_to_generic(content: str) -> None:
    preview = tool_result_preview("query_kb", content, 300)
    assert preview.startswith("[HEAD]\n") and "\n[MIDDLE]\n" in preview and "\n[TAIL]\n" in preview


@pytest.mark.parametrize(
    "content",
    [
        '{"results": [{"id": "a"}, 3]}',
        '[{"id": "a"}, "b"]',
        '{"code": 0, "data": {"results": [{"id": "a"}, null]}}',
        '{"results": [{"id": "a"}, [1]]} and a note',
    ],
)
def test_a_record_that_is_not_an_object_gives_no_structured_preview(content: str) -> None:
    """None, not an error: every record must be an object."""
    assert structured_preview("query_kb", content, 300) is None


def test_body_is_clipped_head_tail() -> None:
    record = {"id": "r1", "title": "T", "content": "A" * 300 + "MIDDLE" + "Z" * 300}
    document = json.loads(structured_preview("query_kb", json.dumps([record] * 3), 100))
    body = document["results"][0]["content"]
    assert body.startswith("A") and body.endswith("Z") and "…" in body
    assert "MIDDLE" not in body


def test_multibyte_text_is_never_cut_inside_a_character() -> None:
    text = ("中文内容👍🏽🇨🇳é" + "👨‍👩‍👧") * 400
    preview = generic_preview(text, 50)
    preview.encode("utf-8")  # no lone surrogates
    for piece in (
        preview.replace("[MIDDLE]", "[HEAD]").replace("[TAIL]", "[HEAD]").split("\n[HEAD]\n")
    ):
        piece = piece.removeprefix("[HEAD]\n")
        assert not piece or piece[0] not in "\u200d\U0001f3fd\u0301"
        assert not piece or piece[-1] != "\u200d"
    records = [{"id": n, "title": "标题", "content": text} for n in range(5)]
    structured = tool_result_preview("query_kb", json.dumps(records, ensure_ascii=False), 80)
    json.loads(structured).get("results")
    structured.encode("utf-8")


@settings(max_examples=examples(150))
@given(st.text(min_size=0, max_size=200), st.integers(min_value=0, max_value=220))
def test_cuts_are_always_at_safe_boundaries(text: str, index: int) -> None:
    end = cut_end(text, index)
    start = cut_start(text, index)
    assert 0 <= end <= min(index, len(text))
    assert min(index, len(text)) <= start <= len(text)
    assert not _splits_character(text, end) and not _splits_character(text, start)
    clipped = clip_head_tail(text, max(1, index))
    assert len(clipped) <= max(1, index) or clipped == text


def test_a_text_cut_to_one_character_still_shows_the_mark() -> None:
    """A body given room for one character reads "…", never an empty string (that would look
    like a field the tool returned empty)."""
    assert clip_head_tail("abcdef", 1) == "…"
    assert clip_head_tail("abcdef", 0) == ""
    assert clip_head_tail("abcdef", 2) == "a…"


@settings(max_examples=examples(100))
@given(st.text(max_size=3000), st.integers(min_value=1, max_value=400))
def test_preview_never_raises_and_never_exceeds_budget(text: str, limit: int) -> None:
    for tool in ("query_kb", "web_search", "run"):
        preview = tool_result_preview(tool, text, limit)
        assert isinstance(preview, str)
        if len(text) > limit * 4:
            body = preview
            for label in ("[HEAD]\n", "\n[MIDDLE]\n", "\n[TAIL]\n"):
                body = body.replace(label, "", 1)
            assert len(body) <= limit * 4


def test_web_search_drops_empty_and_host_only_site_names() -> None:
    records = [
        {"title": "A", "url": "https://Docs.Example.com/a", "site_name": "docs.example.com",
         "publish_time": None, "score": 0.5, "snippet": "alpha"},
        {"title": "B", "url": "https://blog.example.org/b", "site_name": "Example Blog",
         "publish_time": "", "score": 0.4, "snippet": "beta"},
    ]  # fmt: skip
    ours = json.loads(structured_preview("web_search", json.dumps(records), 300) or "{}")
    assert "site_name" not in ours["results"][0] and "publish_time" not in ours["results"][0]
    assert ours["results"][1]["site_name"] == "Example Blog"  # a display name is information
    assert "publish_time" not in ours["results"][1]
    assert ours["results"][0]["url"] == "https://Docs.Example.com/a"


def _yuxi_records(count: int, *, title_chars: int = 60) -> list[dict]:
    """query_kb records with Yuxi's full metadata and long CJK titles (distinct per record)."""
    records = []
    for n in range(count):
        title = f"第{n}章" + "客户数据保留与删除策略实施细则" * (title_chars // 15)
        source = f"minio://kb/kb_support/file-{n}/客户数据保留策略_{n}.pdf"
        records.append(
            {
                "id": f"9f3c2a1e-0b7d-4c55-8e21-{n:012d}",
                "kb_id": "kb_support",
                "file_id": f"file-{n}",
                "title": title,
                "source": source,
                "score": 0.7234567403793335 - n / 1000,
                "distance": 0.2765432596206665 + n / 1000,
                "content": "正文内容 " * 200,
                "metadata": {
                    "source": source,
                    "filename": f"客户数据保留策略_{n}.pdf",
                    "title": title,
                    "chunk_index": n,
                    "score": 0.7234567403793335 - n / 1000,
                    "rerank_score": 0.91 - n / 100,
                    "hybrid_score": 0.55 + n / 100,
                    "graph_score": 0.33 + n / 100,
                    "distance": 0.2765432596206665 + n / 1000,
                },
            }
        )
    return records


def test_metadata_repeated_across_records_is_written_once_in_common() -> None:
    records = [
        {
            "id": f"chunk-{n}",
            "kb_id": "kb_policies",
            "file_id": "file-refunds",
            "source": "policies/refunds.md",
            "score": 0.9 - n / 10,
            "content": "Annual plans can be refunded pro rata within 30 days. " * 5,
            "metadata": {"filename": "refunds.md", "chunk_index": n, "rerank_score": 0.8},
        }
        for n in range(5)
    ]
    text = structured_preview("query_kb", json.dumps(records), 300)  # a bare list: no header kb_id
    assert text is not None and len(text) <= 1200
    document = json.loads(text)
    assert document["common"] == {
        "kb_id": "kb_policies",
        "source": "policies/refunds.md",
        "file_id": "file-refunds",
        "metadata": {"rerank_score": 0.8},  # the filename is the source's end: left out
    }
    for shown, record in zip(document["results"], records, strict=True):
        assert not {"kb_id", "source", "file_id"} & set(shown)
        assert shown["metadata"] == {"chunk_index": record["metadata"]["chunk_index"]}
        merged = _overlay(document, shown)
        for key in ("id", "kb_id", "file_id", "source", "score"):
            assert merged[key] == record[key]
        assert {**merged["metadata"], "filename": "refunds.md"} == record["metadata"]
    assert text.count("policies/refunds.md") == 1
    # A value only some records share stays with each record.
    records[2]["file_id"] = "file-other"
    document = json.loads(structured_preview("query_kb", json.dumps(records), 300) or "{}")
    assert "file_id" not in document["common"]
    assert [r["file_id"] for r in document["results"]] == [r["file_id"] for r in records]


def test_a_field_only_one_record_has_is_shown_on_that_record() -> None:
    """Fields no shown record has are passed over; one that a single record has (at the
    top or under metadata, first or last) is still placed on that record."""
    records = [
        {"id": f"chunk-{n}", "score": 0.9 - n / 10, "content": "body text " * 20} for n in range(4)
    ]
    records[0]["metadata"] = {"chunk_index": 0}
    records[2]["metadata"] = {"filename": "refunds.md"}
    records[3]["title"] = "Refund policy"
    document = json.loads(structured_preview("query_kb", json.dumps(records), 300) or "{}")
    shown = document["results"]
    assert [r["id"] for r in shown] == [r["id"] for r in records]
    assert [r.get("title") for r in shown] == [None, None, None, "Refund policy"]
    assert [r.get("metadata") for r in shown] == [
        {"chunk_index": 0},
        None,
        {"filename": "refunds.md"},
        None,
    ]
    assert "common" not in document


def test_results_inside_an_envelope_are_found() -> None:
    records = _yuxi_records(10, title_chars=15)
    envelope = {"code": 0, "message": "ok", "data": {"query": "q", "results": records}}
    document = json.loads(tool_result_preview("query_kb", json.dumps(envelope), 300))
    assert document["kind"] == "knowledge_base" and document["query"] == "q"
    shown = [r["id"] for r in document["results"]]
    assert shown and shown == [r["id"] for r in records[: len(shown)]]


_TRICKY = (
    "e\u0301",  # combining acute
    "👨\u200d👩\u200d👧",  # ZWJ family
    "👍🏽",  # skin tone
    "🇨🇳🇯🇵",  # flag pairs
    "中文",
    "\u0915\u094d\u0937",  # Devanagari with virama (a spacing/non-spacing mark)
    '"\\\n\t',  # JSON escapes
    "a",
)


@settings(max_examples=examples(120))
@given(
    st.lists(st.sampled_from(_TRICKY), min_size=1, max_size=120).map("".join),
    st.integers(min_value=40, max_value=400),
    st.sampled_from(("query_kb", "web_search")),
)
def test_structured_preview_never_cuts_inside_a_character(text: str, limit: int, tool: str) -> None:
    """Every clipped string in the preview is a head and a tail of the original, cut where no
    character is split (combining marks, joiners, skin tones, flag pairs)."""
    records = [
        {"id": f"r{n}", "url": f"https://example.com/{n}", "score": 0.5, "title": text * 2,
         "source": text, "content": text * 5, "snippet": text * 5,
         "metadata": {"filename": text, "title": text[::-1]}}
        for n in range(10)
    ]  # fmt: skip
    preview = structured_preview(tool, json.dumps({"results": records}), limit)
    if preview is None:
        return
    preview.encode("utf-8")  # no lone surrogates
    originals = {text * 2, text, text * 5, text[::-1]}

    def strings(value: object) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for item in value.values() for s in strings(item)]
        if isinstance(value, list):
            return [s for item in value for s in strings(item)]
        return []

    for shown in strings(json.loads(preview)["results"]):
        if shown in originals or shown.startswith(("r", "https://")):
            continue
        assert "…" in shown, shown
        head, _, tail = shown.rpartition("…") if shown.count("…") > 1 else shown.partition("…")
        matches = [o for o in originals if o.startswith(head) and o.endswith(tail)]
        assert matches, shown
        original = matches[0]
        assert not _splits_character(original, len(head))
        assert not _splits_character(original, len(original) - len(tail))


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities too: json.loads accepts them
    | st.text(max_size=60),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)
_KEYS = st.sampled_from(
    ("id", "url", "score", "title", "source", "file_id", "kb_id", "distance", "site_name",
     "publish_time", "content", "snippet", "text", "summary", "metadata")
)  # fmt: skip
_RECORD = st.dictionaries(_KEYS, _JSON_VALUES | st.dictionaries(
    st.sampled_from(("source", "filename", "title", "chunk_index", "score", "rerank_score")), _JSON_VALUES, max_size=6
), max_size=10)  # fmt: skip


@settings(max_examples=examples(200))
@given(
    st.lists(_RECORD, max_size=14),
    st.dictionaries(st.sampled_from(("query", "kb_id", "response_time")), _JSON_VALUES),
    st.integers(min_value=1, max_value=500),
    st.sampled_from(("query_kb", "web_search", "mcp__kb__query_kb")),
    st.booleans(),
)
def test_structured_preview_never_raises_and_respects_the_budget(
    records: list, header: dict, limit: int, tool: str, bare: bool
) -> None:
    """Odd records (wrong types, nesting, NaN, empty values, quotes and escapes) never raise;
    a structured preview is valid JSON within limit × 4 characters, whole ids unclipped."""
    payload = json.dumps(records if bare else {**header, "results": records}, ensure_ascii=False)
    preview = tool_result_preview(tool, payload, limit)
    assert isinstance(preview, str)
    structured = structured_preview(tool, payload, limit)
    if structured is None:
        return
    assert structured == preview
    assert len(structured) <= limit * 4
    document = json.loads(structured)
    assert document["result_count"] == len(records)
    assert document["omitted_results"] == len(records) - len(document["results"])
    for shown, record in zip(document["results"], records, strict=False):
        for key in ("id", "url"):
            if key in shown:
                assert json.dumps(shown[key]) == json.dumps(record[key])  # shown whole


def _sweep_payloads() -> list[tuple[str, str]]:
    escaped = [
        {"url": f'https://example.com/q?a="{n}"&b=\\{n}', "score": 0.5, "title": f'"T{n}"\t\\',
         "site_name": "Ex\u2028ample", "publish_time": "2026-01-02", "snippet": 'x"\\\n' * 40}
        for n in range(12)
    ]  # fmt: skip
    shared = [
        {"id": f"c{n}", "kb_id": "kb", "file_id": "f", "source": "s.md", "score": 0.9,
         "content": "body " * 50, "metadata": {"filename": "s.md", "chunk_index": n,
         "rerank_score": 0.8, "hybrid_score": 0.1 * n, "graph_score": None}}
        for n in range(9)
    ]  # fmt: skip
    odd_numbers = [
        {"id": f"n{n}", "score": [float("nan"), float("inf"), -float("inf"), 10**30][n % 4],
         "distance": float("nan"), "metadata": {"rerank_score": float("inf"), "chunk_index": n,
         "hybrid_score": -float("inf"), "graph_score": float("nan")}, "content": "b" * 300}
        for n in range(10)
    ]  # fmt: skip
    return [
        ("query_kb", json.dumps({"query": "退款", "kb_id": "kb_support", "results": _yuxi_records(12)})),
        ("query_kb", kb_payload(30)),
        ("web_search", json.dumps({"query": "q", "results": escaped})),
        ("query_kb", json.dumps(shared)),
        ("query_kb", json.dumps({"results": odd_numbers})),
    ]  # fmt: skip


@pytest.mark.parametrize("tool,payload", _sweep_payloads())
def test_structured_preview_never_exceeds_the_budget_over_a_sweep(tool: str, payload: str) -> None:
    """Over a sweep of limits the preview is valid JSON of at most limit × 4 characters: sizes
    are counted exactly, escapes, commas, NaN and Infinity included."""
    for limit in range(15, 420, 3):
        preview = structured_preview(tool, payload, limit)
        if preview is None:
            continue
        assert len(preview) <= limit * 4, limit
        document = json.loads(preview)
        assert document["omitted_results"] == document["result_count"] - len(document["results"])


def test_dashboard_rows_carry_the_common_values() -> None:
    """The tool-results table reads a compact preview with ``common`` values into every row."""
    from yuxi_dash.ui.page_text import structured_records

    preview = tool_result_preview("query_kb", kb_payload(3), 300)
    assert '"common":' in preview
    rows = structured_records(preview)
    assert rows is not None
    assert [row["metadata.rerank_score"] for row in rows["records"]] == [0.5, 0.5, 0.5]
    assert [row["id"] for row in rows["records"]] == ["chunk-0", "chunk-1", "chunk-2"]


@settings(max_examples=examples(300))
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_dumps_writes_what_json_dumps_writes(document: object) -> None:
    from yuxi_dash.compression.previews.clipping import dumps

    assert dumps(document) == json.dumps(document, ensure_ascii=False, separators=(",", ":"))
