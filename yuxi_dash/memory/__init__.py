"""Graphiti memory on FalkorDB: group ids, the embedded server, the driver, the views.

Public API: `derive_group_id` (other tools import it). Everything a page or the CLI calls
goes through `yuxi_dash.memory.views.gated_views`, which checks the LaunchDarkly gate
before any graph query and audits every view of a user's memory; the support
bundle (`memory.support.bundle`) opens the same door, and `memory.support.forget` (admin only,
audited) erases a user's memory and verifies it is gone.
"""

from __future__ import annotations

from yuxi_dash.memory.graph.groups import derive_group_id, user_id_from_group

__all__ = ["derive_group_id", "user_id_from_group"]
