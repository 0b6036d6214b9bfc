"""Whole records in a structured preview (compression.evidence), for any records and budget."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.profiles import examples
from yuxi_dash.compression import structured_preview, tool_result_preview
from yuxi_dash.compression.previews.citation_records import MAX_TITLE_CHARS
from yuxi_dash.compression.previews.clipping import clip_head_tail
from yuxi_dash.compression.previews.evidence import LEAD_BODY_CHARS

KIND = {"query_kb": "knowledge_base", "web_search": "web_search"}
# The citation of a record, stated here as the issue states it: where each field may be.
KB_PLACES = {
    "id": ("id",),
    "title": ("title", "metadata.title"),
    "source": ("source", "metadata.source", "metadata.filename"),
    "chunk_index": ("metadata.chunk_index", "chunk_index"),
    "score": ("score", "metadata.score"),
}
WEB_PLACES = {"url": ("url",), "title": ("title",), "score": ("score",)}


def _at(record: dict[str, Any], place: str) -> Any:
    if place.startswith("metadata."):
        metadata = record.get("metadata")
        return metadata.get(place[9:]) if isinstance(metadata, dict) else None
    return record.get(place)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | dict) and not value)


def expected_citation(record: dict[str, Any], tool: str) -> dict[str, Any]:
    """place -> the value a whole record shows there."""
    out: dict[str, Any] = {}
    for name, places in (KB_PLACES if tool == "query_kb" else WEB_PLACES).items():
        for place in places:
            value = _at(record, place)
            if not _empty(value):
                if name == "title" and isinstance(value, str):
                    value = clip_head_tail(value, MAX_TITLE_CHARS)
                out[place] = value
                break
    return out


def overlay(document: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    common = document.get("common", {})
    merged = {**common, **record}
    if "metadata" in common or "metadata" in record:
        merged["metadata"] = {**common.get("metadata", {}), **record.get("metadata", {})}
    return merged


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def check_whole(document: dict[str, Any], records: list[dict[str, Any]], tool: str) -> None:
    """Every shown record is the record at its position, whole; the counts add up."""
    shown = document["results"]
    assert document["result_count"] == len(records)
    assert document["omitted_results"] + len(shown) == len(records)
    for position, record in enumerate(shown):
        merged = overlay(document, record)
        for place, value in expected_citation(records[position], tool).items():
            assert _same(_at(merged, place), value), (position, place)


_SCALARS = (
    st.text(max_size=40)
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.none()
)
_METADATA = st.dictionaries(
    st.sampled_from(["source", "filename", "title", "chunk_index", "score", "rerank_score", "x"]),
    _SCALARS,
    max_size=6,
)
_RECORD = st.fixed_dictionaries(
    {},
    optional={
        "id": st.text(min_size=1, max_size=40) | st.integers(0, 10**6),
        "url": st.text(min_size=1, max_size=80).map(lambda s: "https://example.com/" + s),
        "title": st.text(max_size=120),
        "source": st.text(max_size=80) | st.none(),
        "score": st.floats(0, 1) | st.integers(0, 100),
        "file_id": st.text(max_size=20),
        "site_name": st.text(max_size=20),
        "content": st.text(max_size=600),
        "snippet": st.text(max_size=300),
        "metadata": _METADATA,
        "noise": _SCALARS,
    },
)


@settings(max_examples=examples(300))
@given(
    st.lists(_RECORD, max_size=25),
    st.integers(min_value=0, max_value=800),
    st.sampled_from(["query_kb", "web_search"]),
    st.booleans(),
)
def test_any_records_any_budget_every_shown_record_is_whole_and_in_order(
    records: list[dict[str, Any]], limit: int, tool: str, bare: bool
) -> None:
    payload = records if bare else {"query": "refund policy", "kb_id": "kb", "results": records}
    text = json.dumps(payload, ensure_ascii=False)
    preview = structured_preview(tool, text, limit)
    if preview is None:  # only when not even the leading record, alone and bare, fits
        if records:
            first: dict[str, Any] = {}
            for place, value in expected_citation(records[0], tool).items():
                if place.startswith("metadata."):
                    first.setdefault("metadata", {})[place[9:]] = value
                else:
                    first[place] = value
            smallest = json.dumps(
                {"kind": KIND[tool], "result_count": len(records), "results": [first],
                 "omitted_results": len(records) - 1},
                ensure_ascii=False, separators=(",", ":"),
            )  # fmt: skip
            assert len(smallest) > limit * 4
        else:  # no record at all: only when even the empty envelope does not fit
            empty = json.dumps(
                {"kind": KIND[tool], "result_count": 0, "results": [], "omitted_results": 0},
                separators=(",", ":"),
            )
            assert limit * 4 < len(empty)
        assert tool_result_preview(tool, text, limit) in (
            text,
            tool_result_preview("x", text, limit),
        )
        return
    assert len(preview) <= limit * 4
    document = json.loads(preview)
    check_whole(document, records, tool)
    if records:
        assert document["results"], "the leading record fits, so it is shown"


@settings(max_examples=examples(100))
@given(st.lists(_RECORD, min_size=1, max_size=12), st.sampled_from(["query_kb", "web_search"]))
def test_with_room_for_everything_every_record_is_shown(records: list, tool: str) -> None:
    text = json.dumps({"results": records}, ensure_ascii=False)
    document = json.loads(structured_preview(tool, text, len(text) * 3 + 500) or "{}")
    assert document["omitted_results"] == 0
    check_whole(document, records, tool)


def _yuxi_kb(count: int) -> list[dict[str, Any]]:
    """query_kb records as Yuxi returns them: the listed fields at the top and again nested."""
    records = []
    for n in range(count):
        source = f"kb_support/refunds/refunds_{n:03d}.md"
        records.append(
            {
                "id": f"chunk-{n}-{n * 7 % 40}",
                "kb_id": "kb_support",
                "file_id": f"file-refunds-{n:03d}",
                "title": f"Refund policy - part {n}",
                "source": source,
                "score": round(0.95 - n * 0.05, 4),
                "distance": round(0.05 + n * 0.05, 4),
                "content": f"Chunk {n}: annual plans are refunded pro rata within 30 days. " * 8,
                "metadata": {
                    "source": source,
                    "filename": f"refunds_{n:03d}.md",
                    "title": f"Refund policy - part {n}",
                    "chunk_index": n * 7 % 40,
                    "score": round(0.95 - n * 0.05, 4),
                    "rerank_score": 0.8,
                    "internal_host_path": "/srv/kb/0001.bin",
                    "embedding_model": "bge-m3",
                },
            }
        )
    return records


def test_query_kb_keeps_identity_and_metadata() -> None:
    records = _yuxi_kb(16)
    text = json.dumps({"query": "refunds", "kb_id": "kb_support", "results": records})
    preview = tool_result_preview("query_kb", text, 300)
    assert len(preview) <= 1200
    document = json.loads(preview)
    check_whole(document, records, "query_kb")
    shown = [overlay(document, r) for r in document["results"]]
    assert len(shown) >= 5  # at least 30% of 16 records citable
    for record, original in zip(shown, records, strict=False):
        assert record["id"] == original["id"] and record["source"] == original["source"]
        assert record["metadata"]["chunk_index"] == original["metadata"]["chunk_index"]
        assert record["title"] == original["title"] and record["score"] == original["score"]
    lead = shown[0]["content"]
    assert len(lead) >= LEAD_BODY_CHARS and lead.startswith("Chunk 0: annual plans")
    assert "internal_host_path" not in preview and "embedding_model" not in preview
    assert "query" not in document  # records first: the query is in the tool call anyway
    roomy = json.loads(tool_result_preview("query_kb", text, 3000))
    assert roomy["query"] == "refunds" and roomy["kb_id"] == "kb_support"


def test_web_search_keeps_citations_and_reports_omitted_results() -> None:
    records = [
        {
            "url": f"https://docs.example.org/refunds/{n}?utm_source=search&ref={n:08x}",
            "title": f"How refunds work, part {n}",
            "score": round(0.9 - n / 50, 4),
            "site_name": "Example Docs",
            "snippet": "Refunds are issued to the original payment method. " * 6,
            "raw_content": None,
            "favicon": "https://docs.example.org/favicon.ico",
        }
        for n in range(20)
    ]
    preview = tool_result_preview("web_search", json.dumps({"query": "q", "results": records}), 300)
    document = json.loads(preview)
    check_whole(document, records, "web_search")
    assert 4 <= len(document["results"]) < 20
    assert document["omitted_results"] == 20 - len(document["results"])
    assert len(document["results"][0]["snippet"]) >= LEAD_BODY_CHARS
    assert "favicon" not in preview


def test_a_record_too_large_for_the_budget_gives_the_generic_preview() -> None:
    records = [{"id": "x" * 2000, "score": 1, "content": "body " * 100}]
    text = json.dumps({"results": records})
    assert structured_preview("query_kb", text, 300) is None
    assert tool_result_preview("query_kb", text, 300).startswith("[HEAD]\n")
