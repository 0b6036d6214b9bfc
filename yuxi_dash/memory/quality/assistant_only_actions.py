"""The names of assistant-only facts in the audit log: the view, the fleet scan, the bulk
retract's preview, the bulk retract and its undo.

A module of constants only (no graph client, no graphiti-core), so the CLI imports it at
start-up; `memory.quality.assistant_only` and `memory.support.bulk_retract` use the same ones.
"""

from __future__ import annotations

VIEW = "assistant_only"  # the `open_view` name (memory.views.gate.VIEWS)
SCAN_ACTION = "memory.assistant_only_scan"
PREVIEW_ACTION = "memory.bulk_retract_preview"
BULK_ACTION = "memory.bulk_retract"
BULK_UNDO_ACTION = "memory.bulk_undo"
