"""Generic and structured previews: fields kept, record cap, clipping, multi-byte safety."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compression.builders import kb_payload
from yuxi_dash.compression import generic_preview, structured_preview, tool_result_preview
from yuxi_dash.compression.preview import _splits_character, clip_head_tail, cut_end, cut_start


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


def test_query_kb_keeps_identity_and_listed_metadata_only() -> None:
    preview = tool_result_preview("query_kb", kb_payload(3), 300, rule="plain")
    document = json.loads(preview)
    assert document["kind"] == "knowledge_base"
    assert document["result_count"] == 3
    assert document["query"] == "retention policy" and document["kb_id"] == "kb-main"
    assert document["omitted_results"] == 3 - len(document["results"])
    first = document["results"][0]
    for key in ("id", "kb_id", "file_id", "title", "source", "score", "distance"):
        assert key in first
    assert first["id"] == "chunk-0" and first["file_id"] == "file-0"
    assert set(first["metadata"]) == {
        "source", "filename", "title", "chunk_index", "score", "rerank_score",
        "hybrid_score", "graph_score", "distance",
    }  # fmt: skip
    assert "author" not in preview and "page_count" not in preview and "embedding" not in preview
    assert first["content"].startswith("Body of chunk 0.")
    assert len(preview) <= 1200


def test_compact_rule_drops_redundant_values_but_keeps_information() -> None:
    plain = json.loads(tool_result_preview("query_kb", kb_payload(3), 300, rule="plain"))
    ours_text = tool_result_preview("query_kb", kb_payload(3), 300)
    ours = json.loads(ours_text)
    record = ours["results"][0]
    assert "kb_id" not in record  # equal to the header's
    assert record["metadata"] == {"filename": "doc-0.pdf", "chunk_index": 0, "rerank_score": 0.5}
    assert record["title"] == "Document 0" and record["source"] == "docs/doc-0.pdf"
    # Same information: re-expanding ours gives plain's fields (bodies aside).
    for plain_record, our_record in zip(plain["results"], ours["results"], strict=False):
        expanded_meta = {
            k: our_record["metadata"].get(k, our_record.get(k))
            for k in plain_record["metadata"]
            if plain_record["metadata"][k] is not None
        }
        assert expanded_meta == {k: v for k, v in plain_record["metadata"].items() if v is not None}
    assert len(ours["results"]) >= len(plain["results"])


def test_record_cap_is_eight_and_omitted_results_reported() -> None:
    preview = tool_result_preview("query_kb", kb_payload(30), 5000)
    document = json.loads(preview)
    assert len(document["results"]) == 8
    assert [r["id"] for r in document["results"]] == [f"chunk-{n}" for n in range(8)]
    assert document["result_count"] == 30 and document["omitted_results"] == 22


def test_records_that_do_not_fit_are_omitted_in_order() -> None:
    document = json.loads(tool_result_preview("query_kb", kb_payload(30), 300))
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
        document = json.loads(tool_result_preview("web_search", payload, 400))
        assert document["kind"] == "web_search" and document["result_count"] == 12
        first = document["results"][0]
        assert {"title", "url", "site_name", "publish_time", "score"} <= set(first)
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


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=0, max_size=200), st.integers(min_value=0, max_value=220))
def test_cuts_are_always_at_safe_boundaries(text: str, index: int) -> None:
    end = cut_end(text, index)
    start = cut_start(text, index)
    assert 0 <= end <= min(index, len(text))
    assert min(index, len(text)) <= start <= len(text)
    assert not _splits_character(text, end) and not _splits_character(text, start)
    clipped = clip_head_tail(text, max(1, index))
    assert len(clipped) <= max(1, index) or clipped == text


@settings(max_examples=100, deadline=None)
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


def test_compact_web_search_drops_empty_and_host_only_site_names() -> None:
    records = [
        {"title": "A", "url": "https://Docs.Example.com/a", "site_name": "docs.example.com",
         "publish_time": None, "score": 0.5, "snippet": "alpha"},
        {"title": "B", "url": "https://blog.example.org/b", "site_name": "Example Blog",
         "publish_time": "", "score": 0.4, "snippet": "beta"},
    ]  # fmt: skip
    plain = json.loads(structured_preview("web_search", json.dumps(records), 300, rule="plain"))
    ours = json.loads(structured_preview("web_search", json.dumps(records), 300))
    assert plain["results"][0]["site_name"] == "docs.example.com"
    assert plain["results"][0]["publish_time"] is None
    assert "site_name" not in ours["results"][0] and "publish_time" not in ours["results"][0]
    assert ours["results"][1]["site_name"] == "Example Blog"  # a display name is information
    assert "publish_time" not in ours["results"][1]
    assert ours["results"][0]["url"] == "https://Docs.Example.com/a"


def test_compact_rule_fits_more_records_in_the_same_budget() -> None:
    payload = kb_payload(30)
    plain = json.loads(structured_preview("query_kb", payload, 300, rule="plain"))
    ours = json.loads(structured_preview("query_kb", payload, 300))
    assert len(ours["results"]) > len(plain["results"])
    assert ours["omitted_results"] < plain["omitted_results"]


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda children: (
            st.lists(children, max_size=4)
            | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=12,
    )
)
def test_fast_json_encoding_matches_json_dumps(document) -> None:
    from yuxi_dash.compression.preview import _dumps

    assert _dumps(document) == json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def test_compact_rule_fits_identity_fields_before_bodies() -> None:
    """Ours shows every record's identity (up to the cap) before spending on bodies;
    a body it does show is at least MIN_BODY_CHARS long (or the whole body)."""
    from yuxi_dash.compression.preview import MIN_BODY_CHARS

    records = [
        {
            "title": f"Result {n} of the search about data retention",
            "url": f"https://example.com/articles/retention/page-{n}",
            "score": 0.5,
            "content": "Long body text " * 80,
        }
        for n in range(10)
    ]
    payload = json.dumps({"query": "q", "results": records})
    plain = json.loads(structured_preview("web_search", payload, 300, rule="plain"))
    ours_text = structured_preview("web_search", payload, 300)
    assert ours_text is not None and len(ours_text) <= 1200
    ours = json.loads(ours_text)
    assert [r["url"] for r in ours["results"]] == [
        f"https://example.com/articles/retention/page-{n}" for n in range(8)
    ]
    assert len(plain["results"]) < 8
    assert ours["omitted_results"] == 2
    for record in ours["results"]:
        assert len(record.get("content", "x" * MIN_BODY_CHARS)) >= MIN_BODY_CHARS
    # With room to spare, the bodies get it (evenly, clipped head…tail).
    roomy = json.loads(structured_preview("web_search", payload, 1000))
    assert all("…" in r["content"] and len(r["content"]) > 100 for r in roomy["results"])
