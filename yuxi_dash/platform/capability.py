"""Which threads can be compressed, and why not: the one rule for the pages, the CLI and alerts.

- Our own thread: its agent must be known here and have ``context_compression``.
- An attached platform's thread is compressed there (`platform.compress`) when
  ``YUXI_DASH_PLATFORM_URL`` is set; without it the dashboard refuses (`thread_attached`).
- A 422 from the platform is remembered from the audit log (the newest platform compress
  row: a 422 means unsupported, a completed or no_op since then clears it), per agent the
  platform named (checkpoint metadata ``assistant_id`` / ``graph_id``). A thread it named
  no agent for carries the fallback slug `UNNAMED_AGENT` (the projector's), no agent:
  its 422 is remembered for that thread alone.
- `capability(session, settings).blocker(...)` is the verdict the pages and alert rules use;
  `refuse_remembered` applies it before a call (`platform.bulk`, `yuxi-dash compress`),
  audited; the CLI's ``--ask-platform`` asks the platform anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.access.audit import record_audit_eventually, thread_target
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import CompressionUnsupported
from yuxi_dash.platform.client import platform_label
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Agent, AuditEntry, Conversation
from yuxi_dash.store.thread_list import attached_platform
from yuxi_dash.wording import attached_label

log = logging.getLogger(__name__)

# the agent slug the projector gives a thread whose checkpoints name none (README, "Attach
# to a platform"): not an agent, so never a key of what the platform refused
UNNAMED_AGENT = "attached"

_LOOK_BACK = 2000  # newest compress audit rows read
COMPRESS_ACTION = "compress"  # `platform.compress` writes its rows under this action


def named_by_platform(agent_slug: str | None) -> bool:
    """Whether an attached thread's agent is one the platform named (not the fallback slug)."""
    return bool(agent_slug) and agent_slug != UNNAMED_AGENT


@dataclass(frozen=True)
class PlatformRefusals:
    """The platform's remembered 422s: per agent it named, per thread for the others."""

    agents: Mapping[str, str] = field(default_factory=dict)  # agent slug -> why
    threads: Mapping[str, str] = field(default_factory=dict)  # thread id (no agent) -> why

    def of(self, thread_id: str, agent_slug: str | None) -> str | None:
        """Why the platform will not compress this thread (None: no 422 remembered)."""
        if named_by_platform(agent_slug):
            return self.agents.get(str(agent_slug))
        return self.threads.get(thread_id)


def platform_refusals(session: Session) -> PlatformRefusals:
    """The remembered 422s, read from the newest platform compress audit rows."""
    rows = session.execute(
        sa.select(AuditEntry.target, AuditEntry.outcome, AuditEntry.detail)
        .where(AuditEntry.action == COMPRESS_ACTION)
        .order_by(AuditEntry.id.desc())
        .limit(_LOOK_BACK)
    )
    verdict: dict[tuple[str, str], str | None] = {}
    for target, outcome, detail in rows:
        if not isinstance(detail, dict) or not detail.get("platform") or detail.get("remembered"):
            continue  # not the platform's answer (ours, or a refusal from this memory)
        agent = detail.get("agent")
        if not isinstance(agent, str):
            continue
        thread_id = str(target).removeprefix("thread:")
        key = ("agent", agent) if named_by_platform(agent) else ("thread", thread_id)
        if key in verdict:
            continue
        if outcome in ("completed", "no_op"):
            verdict[key] = None
        elif detail.get("code") == "compression_unsupported":
            verdict[key] = (
                f"the platform said agent {agent} does not support context compression"
                if key[0] == "agent"
                else f"the platform said it cannot compress thread {thread_id} "
                "(it names no agent for it)"
            )
    return PlatformRefusals(
        agents={k: v for (kind, k), v in verdict.items() if kind == "agent" and v},
        threads={k: v for (kind, k), v in verdict.items() if kind == "thread" and v},
    )


def unsupported_agents(session: Session) -> dict[str, str]:
    """agent slug -> the platform's last word, for the agents it named whose newest was 422."""
    return dict(platform_refusals(session).agents)


def attached_reason(platform: str | None) -> str:
    """Why an attached thread is not compressed while no platform endpoint is set."""
    return (
        f"{attached_label(platform)}: the platform owns this thread; "
        "set YUXI_DASH_PLATFORM_URL to compress it through the platform"
    )


@dataclass(frozen=True)
class Capability:
    """What one read says can be compressed: our agents, the platform's endpoint and its 422s."""

    platform_configured: bool
    agents: Mapping[str, bool]  # our agents: slug -> has context_compression
    refusals: PlatformRefusals
    platform: str | None = None  # the attached platform's label, for the reason

    def blocker(
        self,
        thread_id: str,
        agent_slug: str | None,
        *,
        attached: bool,
        platform: str | None = None,
    ) -> str | None:
        """Why this thread cannot be compressed (None: it can; busy or stale is decided later)."""
        if attached:
            if not self.platform_configured:
                return attached_reason(platform or self.platform)
            return self.refusals.of(thread_id, agent_slug)
        capable = self.agents.get(str(agent_slug))
        if capable is None:
            return f"agent {agent_slug} not found"
        return None if capable else f"agent {agent_slug} does not support context compression"


def capability(session: Session, settings: Settings, *, attached: bool = True) -> Capability:
    """Read the verdict once for a page or a pass (``attached`` False: no platform reads)."""
    agents = {a.slug: a.compression_capable for a in session.scalars(sa.select(Agent))}
    configured = settings.platform_configured
    return Capability(
        platform_configured=configured,
        agents=agents,
        refusals=platform_refusals(session) if attached and configured else PlatformRefusals(),
        platform=attached_platform(session) if attached and not configured else None,
    )


def refuse_remembered(thread_id: str, *, actor: Actor, settings: Settings) -> None:
    """Before a call to the platform: refuse (one audit row) what the verdict says it refuses.

    Only an operator's compress of an attached thread with the endpoint set is checked
    here; every other refusal is the service's.
    """
    if not settings.platform_configured or actor.role < Role.OPERATOR:
        return
    with session_scope(settings) as session:
        row = session.execute(
            sa.select(Conversation.agent_slug, Conversation.origin, Conversation.status).where(
                Conversation.thread_id == thread_id
            )
        ).first()
        if row is None or row.origin != ORIGIN_ATTACHED or row.status == "deleted":
            return
        reason = platform_refusals(session).of(thread_id, row.agent_slug)
    if reason is None:
        return
    detail: dict[str, Any] = {
        "role": actor.role.label,
        "via": actor.via,
        "platform": platform_label(str(settings.platform_url)),
        "agent": row.agent_slug,
        "code": CompressionUnsupported.code,
        "remembered": True,  # nothing was sent: this row is not the platform's word
    }
    try:
        record_audit_eventually(
            actor=actor.id,
            action=COMPRESS_ACTION,
            target=thread_target(thread_id),
            outcome="refused",
            detail=detail,
            settings=settings,
        )
    except Exception:  # noqa: BLE001 - the refusal must reach the caller, not the hiccup
        log.error("audit row for a remembered compress refusal could not be written")
    raise CompressionUnsupported(
        f"{reason}; nothing was sent (`yuxi-dash compress --ask-platform` asks it again)"
    )
