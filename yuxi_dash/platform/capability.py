"""Which attached threads the dashboard may send to the platform, and why not.

A thread of the attached platform is compressed there (`platform.compress`)
when ``YUXI_DASH_PLATFORM_URL`` is set; without it the dashboard refuses
(`thread_attached`) with that reason. An agent the platform answered 422 for
is remembered from the audit log (the newest platform compress row naming the
agent: a 422 there means unsupported, a completed or no_op since then clears
it), so the pages disable the button and say why.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.settings import Settings
from yuxi_dash.store.models import AuditEntry
from yuxi_dash.wording import attached_label

_LOOK_BACK = 2000  # newest compress audit rows read


def unsupported_agents(session: Session) -> dict[str, str]:
    """agent slug -> the platform's last word, for agents whose newest platform compress was 422."""
    rows = session.execute(
        sa.select(AuditEntry.outcome, AuditEntry.detail)
        .where(AuditEntry.action == "compress")
        .order_by(AuditEntry.id.desc())
        .limit(_LOOK_BACK)
    )
    verdict: dict[str, str | None] = {}
    for outcome, detail in rows:
        if not isinstance(detail, dict) or not detail.get("platform"):
            continue
        agent = detail.get("agent")
        if not isinstance(agent, str) or agent in verdict:
            continue
        if outcome in ("completed", "no_op"):
            verdict[agent] = None
        elif detail.get("code") == "compression_unsupported":
            verdict[agent] = f"the platform said agent {agent} does not support context compression"
    return {agent: reason for agent, reason in verdict.items() if reason}


def attached_reason(platform: str | None) -> str:
    """Why an attached thread is not compressed while no platform endpoint is set."""
    return (
        f"{attached_label(platform)}: the platform owns this thread; "
        "set YUXI_DASH_PLATFORM_URL to compress it through the platform"
    )


def attached_blocker(
    settings: Settings, row: dict[str, Any], unsupported: dict[str, str]
) -> str | None:
    """Why an attached thread cannot be sent to the platform now (None: it can be)."""
    if not settings.platform_configured:
        return attached_reason(row.get("platform"))
    return unsupported.get(str(row.get("agent_slug")))
