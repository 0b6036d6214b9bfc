"""The support bundle's documented shape: a JSON Schema (draft 2020-12) as a Python dict.

docs/support-bundle.md describes the same shape in words. `SCHEMA_VERSION`
changes only when a field is removed or changes meaning; new optional fields
keep the version. Tests validate every bundle they build against
`BUNDLE_SCHEMA`.
"""

from __future__ import annotations

from typing import Any

SCHEMA_ID = "yuxi-dash/support-bundle"
SCHEMA_VERSION = 1

_STR = {"type": "string"}
_INT = {"type": "integer"}
_BOOL = {"type": "boolean"}
_NUM = {"type": "number"}
_OPT_STR = {"type": ["string", "null"]}
_OPT_INT = {"type": ["integer", "null"]}


def _obj(properties: dict[str, Any], *, extra: bool = False) -> dict[str, Any]:
    return {
        "type": "object",
        "required": sorted(properties),
        "properties": properties,
        "additionalProperties": extra,
    }


FLAG = _obj({"key": _STR, "value": _BOOL, "reason": _STR, "reason_text": _STR})

FACT = _obj(
    {
        "uuid": _STR,
        "source": _OPT_STR,
        "source_uuid": _OPT_STR,
        "name": _OPT_STR,
        "target": _OPT_STR,
        "target_uuid": _OPT_STR,
        "fact": _OPT_STR,
        "status": _OPT_STR,
        "source_kind": _OPT_STR,
        "created_at": _OPT_STR,
        "valid_at": _OPT_STR,
        "invalid_at": _OPT_STR,
        "expired_at": _OPT_STR,
        "live": _BOOL,
        "hits": _INT,
        "provenance": _obj({"episodes": {"type": "array", "items": _STR}}),
    }
)

EPISODE = _obj(
    {
        "uuid": _STR,
        "name": _OPT_STR,
        "source": _OPT_STR,
        "source_description": _OPT_STR,
        "created_at": _OPT_STR,
        "valid_at": _OPT_STR,
        "memory_kind": _OPT_STR,
        "source_kind": _OPT_STR,
        "content_bytes": _INT,
        "content": _STR,
        "content_truncated": _BOOL,
    }
)

CORRECTION = _obj(
    {
        "id": _STR,
        "audit_id": _INT,
        "at": _STR,
        "actor": _STR,
        "action": _STR,
        "fact_uuid": _STR,
        "reason": _STR,
        "ticket": _OPT_STR,
        "audit_action": _OPT_STR,
        "audit_outcome": _OPT_STR,
        "undoes_id": _OPT_STR,
        "undone_at": _OPT_STR,
        "undone_by_audit_id": _OPT_INT,
        "before": {"type": "object"},
        "after": {"type": "object"},
    }
)

TOOL_RESULT = _obj(
    {
        "id": _INT,
        "tool_name": _STR,
        "tool_call_id": _OPT_STR,
        "path": _STR,
        "sha256": _STR,
        "chars": _INT,
        "created_at": _STR,
        "sha256_status": {"enum": ["ok", "mismatch", "missing"]},
    }
)

SUMMARY = {
    "oneOf": [
        {"type": "null"},
        _obj(
            {
                "cutoff_index": _INT,
                "created_at_index": _OPT_INT,
                "file_path": _STR,
                "text": _STR,
            }
        ),
    ]
}

THREAD = _obj(
    {
        "thread_id": _STR,
        "agent_slug": _STR,
        "title": _STR,
        "status": _STR,
        "attached": _BOOL,
        "summary_pressure_ratio": _NUM,
        "context_usage_ratio": _NUM,
        "llm_input_tokens": _INT,
        "next_llm_input_tokens": _INT,
        "summary_trigger_tokens": _INT,
        "context_window": _INT,
        "summary_active": _BOOL,
        "last_compression_at": _OPT_STR,
        "last_activity_at": _OPT_STR,
        "last_summary": SUMMARY,
        "summary_error": _OPT_STR,
        "tool_results": {"type": "array", "items": TOOL_RESULT},
    }
)

MEMORY = _obj(
    {
        "gated_off": _BOOL,
        "gate_message": _OPT_STR,
        "graph_exists": _BOOL,
        "counts": {"type": ["object", "null"]},
    }
)
# `memory bundle --as-of ISO`: the memory as it was then (optional: only in such bundles);
# every fact held then is streamed in the top-level `as_of_facts` (AS_OF_FACTS_FIELDS).
AS_OF = _obj(
    {
        "moment": _STR,
        "counts": _obj({"held": _INT, "valid": _INT, "retired": _INT, "deleted_since": _INT}),
        "episodes": {"type": "array", "items": {"type": "object"}},
        "corrections_after": _INT,
        "corrections_complete": {"type": "boolean"},
    }
)
MEMORY["properties"]["as_of"] = AS_OF
AS_OF_FACTS_FIELDS = {
    "as_of_facts": {"type": "array", "items": {"type": "object"}},
    "as_of_fact_count": _INT,
}

BUNDLE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "yuxi-dash support bundle",
    **_obj(
        {
            "schema": {"const": SCHEMA_ID},
            "schema_version": {"const": SCHEMA_VERSION},
            "generated_at": _STR,
            "generated_by": _STR,
            "user_id": _STR,
            "group_id": _STR,
            "flag_source": _STR,
            "flags": {"type": "array", "items": FLAG},
            "memory": MEMORY,
            "facts": {"type": "array", "items": FACT},
            "fact_count": _INT,
            "episodes": {"type": "array", "items": EPISODE},
            "episode_limit": _INT,
            "corrections": {"type": "array", "items": CORRECTION},
            "threads": {"type": "array", "items": THREAD},
            "not_included": {"type": "array", "items": _STR},
        }
    ),
}
BUNDLE_SCHEMA["properties"].update(AS_OF_FACTS_FIELDS)  # optional: only with --as-of
