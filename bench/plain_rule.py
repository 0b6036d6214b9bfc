"""The modelled system's record rule ("plain"), kept here for the bench to compare.

Every listed field that is present (strings clipped head…tail to 240 chars), of at
most 8 leading records, each with a 32-character body, as many as fit; the spare
characters then to their bodies, evenly. Not the product's rule
(``yuxi_dash.compression.previews.evidence``); ``plain_preview`` swaps it into the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from yuxi_dash.compression import compaction
from yuxi_dash.compression.previews.citation_records import body
from yuxi_dash.compression.previews.clipping import clip_head_tail, dumps
from yuxi_dash.compression.previews.preview import generic_preview, structured_kind
from yuxi_dash.compression.previews.salvage import parse_records_text

KB_FIELDS = ("id", "kb_id", "file_id", "title", "source", "score", "distance")
KB_METADATA = ("source", "filename", "title", "chunk_index", "score", "rerank_score")
KB_METADATA += ("hybrid_score", "graph_score", "distance")
WEB_FIELDS = ("title", "url", "site_name", "publish_time", "score")
HEADER = ("query", "kb_id", "response_time")


def _clip(value: Any) -> Any:
    return clip_head_tail(value, 240) if isinstance(value, str) else value


def _record(record: dict[str, Any], kind: str, body_chars: int) -> str:
    kb = kind == "knowledge_base"
    kept = {key: _clip(record[key]) for key in (KB_FIELDS if kb else WEB_FIELDS) if key in record}
    metadata = record.get("metadata")
    if kb and isinstance(metadata, dict):
        kept["metadata"] = {k: _clip(metadata[k]) for k in KB_METADATA if k in metadata}
    found = body(record)
    if found is not None and body_chars > 0:
        kept[found[0]] = clip_head_tail(found[1], body_chars)
    return dumps(kept)


def plain_structured(tool_name: str, content: str, token_limit: int) -> str | None:
    kind = structured_kind(tool_name)
    parsed = parse_records_text(content.lstrip()) if content.lstrip()[:1] in "{[" else None
    if kind is None or parsed is None or parsed[1] is not None:
        return None
    payload = parsed[0]
    if isinstance(payload, dict) and isinstance(payload.get("results"), list):
        records, source = payload["results"], payload
    elif isinstance(payload, list):
        records, source = payload, {}
    else:
        return None
    if not all(isinstance(record, dict) for record in records):
        return None
    header = {"kind": kind, "result_count": len(records)}
    header.update({key: _clip(source[key]) for key in HEADER if key in source})
    budget = token_limit * 4

    def render(chars: list[int]) -> str:
        shown = ",".join(_record(r, kind, c) for r, c in zip(records, chars, strict=False))
        omitted = len(records) - len(chars)
        return f'{dumps(header)[:-1]},"results":[{shown}],"omitted_results":{omitted}}}'

    chars: list[int] = []
    while len(chars) < min(8, len(records)) and len(render([*chars, 32])) <= budget:
        chars.append(32)
    if not chars:
        return render([0]) if records and len(render([0])) <= budget else None
    for _round in range(4):
        spare = budget - len(render(chars))
        share = spare // len(chars)
        if share <= 0:
            break
        for index in range(len(chars)):
            trial = [*chars]
            trial[index] += share
            if len(render(trial)) <= budget:
                chars = trial
    return render(chars)


def plain_tool_result_preview(tool_name: str | None, content: str, token_limit: int) -> str:
    try:
        structured = plain_structured(tool_name or "", content, token_limit)
    except Exception:
        structured = None
    return structured if structured is not None else generic_preview(content, token_limit)


@contextmanager
def plain_preview() -> Iterator[None]:
    """The engine with the plain rule's previews, while inside."""
    with mock.patch.object(compaction, "tool_result_preview", plain_tool_result_preview):
        yield
