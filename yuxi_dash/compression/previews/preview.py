"""Previews of large tool results: what stays in the model's view after offloading.

Two shapes, both within ``token_limit × 4`` characters:
- the generic preview: ``[HEAD]`` (2/5 of the budget), ``[MIDDLE]`` (1/5, from the middle of
  the text) and ``[TAIL]`` (the rest);
- the structured preview of a ``query_kb`` / ``web_search`` result (a ``results`` list, a
  bare list, or a ``results`` list one level inside an envelope such as ``{"code": 0,
  "data": {...}}``): compact JSON with the result kind and count, the leading records, each
  whole (``citation_records``, fitted by ``evidence``), the header fields (``query``,
  ``kb_id``) as room allows and ``omitted_results``.

The result is decoded once (``salvage.parse_records_text``). Text that is not JSON but starts
with records gets the structured preview of those records, marked ``"salvaged"`` in the
header; other bad or unexpected JSON gets the generic preview. No cut lands inside a
character, and a preview never raises.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from yuxi_dash.agents import DEFAULT_TOOL_RESULT_TOKEN_LIMIT
from yuxi_dash.compression.previews.citation_records import is_empty
from yuxi_dash.compression.previews.clipping import clip_head_tail, cut_end, cut_start
from yuxi_dash.compression.previews.evidence import fit_records
from yuxi_dash.compression.previews.salvage import SalvageKind, parse_records_text

STRUCTURED_KINDS: dict[str, str] = {"query_kb": "knowledge_base", "web_search": "web_search"}
HEADER_FIELDS = ("query", "kb_id")
MAX_HEADER_CHARS = 60  # a longer header string is clipped head…tail
SALVAGE_KEY = "salvaged"  # the structured preview's header names how it was salvaged
_SALVAGE_KINDS = frozenset(get_args(SalvageKind))


def generic_preview(content: str, token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT) -> str:
    """HEAD/MIDDLE/TAIL preview within ``token_limit × 4`` characters of content."""
    budget = max(0, token_limit) * 4
    if len(content) <= budget:
        return content
    head_chars = budget * 2 // 5
    middle_chars = budget // 5
    tail_chars = budget - head_chars - middle_chars
    head = content[: cut_end(content, head_chars)]
    middle_from = cut_start(content, (len(content) - middle_chars) // 2)
    middle = content[middle_from : cut_end(content, middle_from + middle_chars)]
    tail = content[cut_start(content, len(content) - tail_chars) :]
    return f"[HEAD]\n{head}\n[MIDDLE]\n{middle}\n[TAIL]\n{tail}"


def structured_kind(tool_name: str | None) -> str | None:
    """``knowledge_base`` / ``web_search`` for the tools with a structured preview, else None."""
    name = (tool_name or "").strip().lower()
    for tool, kind in STRUCTURED_KINDS.items():
        if name == tool or name.endswith(("__" + tool, "." + tool, "/" + tool)):
            return kind
    return None


def locate_records(payload: Any) -> tuple[list[Any], dict[str, Any]] | None:
    """(records, the object holding the header fields), or None when there are none."""
    if isinstance(payload, list):
        return payload, {}
    if not isinstance(payload, dict):
        return None
    if isinstance(payload.get("results"), list):
        return payload["results"], payload
    for value in payload.values():
        if isinstance(value, dict) and isinstance(value.get("results"), list):
            return value["results"], value
    return None


def structured_preview(
    tool_name: str, content: str, token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT
) -> str | None:
    """The structured preview, or None when the content is not a query_kb/web_search result
    or not even its leading record fits."""
    kind = structured_kind(tool_name)
    stripped = content.lstrip()
    if kind is None or not stripped.startswith(("{", "[")):
        return None
    parsed = parse_records_text(stripped)
    located = None if parsed is None else locate_records(parsed[0])
    if parsed is None or located is None:
        return None
    records, source = located
    if not all(isinstance(record, dict) for record in records):
        return None
    header: dict[str, Any] = {"kind": kind}
    if parsed[1] is not None:
        if not records:
            return None  # nothing recovered: the generic preview says more
        header[SALVAGE_KEY] = parsed[1]
    header["result_count"] = len(records)
    optional: dict[str, Any] = {}
    for key in HEADER_FIELDS:
        value = source.get(key)
        if not is_empty(value):
            optional[key] = (
                clip_head_tail(value, MAX_HEADER_CHARS) if isinstance(value, str) else value
            )
    return fit_records(header, optional, records, kind, max(0, token_limit) * 4)


def tool_result_preview(
    tool_name: str | None, content: str, token_limit: int = DEFAULT_TOOL_RESULT_TOKEN_LIMIT
) -> str:
    """The preview kept in the model's view for an offloaded result; never raises."""
    text = content if isinstance(content, str) else str(content)
    try:
        structured = structured_preview(tool_name or "", text, token_limit)
    except Exception:  # any surprise in odd JSON (a repr's set, bytes) falls back
        structured = None
    return structured if structured is not None else generic_preview(text, token_limit)


def preview_salvage(preview: str, content: str) -> SalvageKind | None:
    """How ``preview`` (the preview made of ``content``) was salvaged, or None.

    None unless ``preview`` is a structured preview whose header carries the
    salvage marker: content short enough to be its own preview, or a generic
    preview, is never reported as salvaged whatever its text says.
    """
    if preview == content or not preview.startswith('{"kind":'):
        return None
    try:
        document = json.loads(preview)
    except ValueError:
        return None
    kind = document.get(SALVAGE_KEY) if isinstance(document, dict) else None
    return kind if isinstance(kind, str) and kind in _SALVAGE_KINDS else None  # type: ignore[return-value]
