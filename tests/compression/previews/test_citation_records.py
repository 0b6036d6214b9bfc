"""One record as a preview shows it (compression.records): its citation and its other fields."""

from __future__ import annotations

from yuxi_dash.compression.previews.citation_records import (
    MAX_TITLE_CHARS,
    ShownRecord,
    body,
    citation,
    extras,
)


def test_a_kb_citation_is_id_title_source_chunk_index_and_score_where_the_record_has_them() -> None:
    record = {
        "id": "c-1",
        "title": "Refunds",
        "score": 0.91,
        "kb_id": "kb",
        "metadata": {"source": "docs/refunds.md", "chunk_index": 4, "filename": "refunds.md"},
    }
    assert citation(record, "knowledge_base") == [
        ((False, "id"), "c-1"),
        ((False, "title"), "Refunds"),
        ((True, "source"), "docs/refunds.md"),
        ((True, "chunk_index"), 4),
        ((False, "score"), 0.91),
    ]


def test_the_filename_stands_in_for_a_missing_source() -> None:
    record = {"id": "c-2", "metadata": {"filename": "a.pdf", "title": "A", "score": 0.5}}
    assert citation(record, "knowledge_base") == [
        ((False, "id"), "c-2"),
        ((True, "title"), "A"),
        ((True, "filename"), "a.pdf"),
        ((True, "score"), 0.5),
    ]


def test_a_web_citation_is_url_title_and_score_and_a_long_title_is_clipped() -> None:
    title = "T" * 200
    cited = dict(citation({"url": "https://x/1", "title": title, "score": 1}, "web_search"))
    assert cited[(False, "url")] == "https://x/1" and cited[(False, "score")] == 1
    shown = cited[(False, "title")]
    assert len(shown) == MAX_TITLE_CHARS and "…" in shown


def test_empty_values_are_not_part_of_a_citation() -> None:
    record = {"id": "", "title": None, "source": [], "score": 0, "metadata": {"chunk_index": 0}}
    assert citation(record, "knowledge_base") == [
        ((True, "chunk_index"), 0),
        ((False, "score"), 0),
    ]


def test_extras_leave_out_what_is_already_visible() -> None:
    record = {
        "id": "c",
        "source": "kb/x/refunds.md",
        "kb_id": "kb",
        "file_id": "f-1",
        "distance": 0.1,
        "metadata": {"filename": "refunds.md", "distance": 0.1, "rerank_score": 0.7},
    }
    assert extras(record, "knowledge_base", "kb", citation(record, "knowledge_base")) == [
        ((False, "file_id"), "f-1"),
        ((True, "rerank_score"), 0.7),
        ((False, "distance"), 0.1),
    ]
    web = {"url": "https://Docs.Example.com/a", "site_name": "docs.example.com", "publish_time": ""}
    assert extras(web, "web_search", None, citation(web, "web_search")) == []


def test_the_body_is_the_first_non_blank_string_and_is_clipped_head_tail() -> None:
    assert body({"content": "  ", "text": 3, "snippet": "s", "summary": "x"}) == ("snippet", "s")
    assert body({"content": None}) is None
    shown = ShownRecord({"id": "a", "content": "A" * 100 + "Z" * 100}, "knowledge_base")
    shown.set_body(40)
    rendered = shown.render()
    assert rendered.startswith('{"id":"a","content":"AAA') and rendered.endswith('ZZ"}')
    assert "…" in rendered
    shown.set_body(0)
    assert shown.render() == '{"id":"a"}'


def test_a_record_renders_without_its_common_pieces() -> None:
    shown = ShownRecord({"id": "a", "score": 1, "metadata": {"chunk_index": 2}}, "knowledge_base")
    assert shown.render() == '{"id":"a","score":1,"metadata":{"chunk_index":2}}'
    common = frozenset({(False, '"score":1'), (True, '"chunk_index":2')})
    assert shown.render(common) == '{"id":"a"}'
