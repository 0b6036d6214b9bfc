"""Whose thread it is, and whether it can be compressed now: decided here, once.

A thread is ours or the attached platform's; the row's ``origin`` says which, and this is
the one module that reads it. Others ask here or take the answer handed on (a row's
``attached`` flag, a `sources.ThreadSource`): `is_attached`, the SQL filters, the names
and labels, `compress_route` ("here", "platform" with ``YUXI_DASH_PLATFORM_URL`` set,
else "none").

`capability(session, settings).blocker(...)` is the verdict of the pages and alert rules.
Our thread: its agent is known here and has ``context_compression``. The platform's 422
is remembered from the newest platform compress audit row (a completed or no_op since
clears it), per agent it named (``assistant_id`` / ``graph_id``), or per thread when it
named none (the projector's fallback slug `UNNAMED_AGENT`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash.settings import Settings
from yuxi_dash.store.models import ORIGIN_ATTACHED, Agent, AuditEntry, Conversation, ScanWatermark
from yuxi_dash.wording import attached_label

# the agent slug the projector gives a thread whose checkpoints name none (README, "Attach
# to a platform"): not an agent, so never a key of what the platform refused
UNNAMED_AGENT = "attached"

_LOOK_BACK = 2000  # newest compress audit rows read
COMPRESS_ACTION = "compress"  # the audit action of every compress, ours and the platform's

ATTACHED_NAME = "attached"  # `origin_name` of the platform's threads
OWN_NAME = "own"  # `origin_name` of ours
SCOPES_BY_ORIGIN = (ATTACHED_NAME, OWN_NAME)  # the alert rule scopes that name a source

ATTACHED_NAME = "attached"  # `origin_name` of the platform's threads
OWN_NAME = "own"  # `origin_name` of ours
SCOPES_BY_ORIGIN = (ATTACHED_NAME, OWN_NAME)  # the alert rule scopes that name a source

ROUTE_HERE = "here"  # our core, under our row lock
ROUTE_PLATFORM = "platform"  # the attached platform's endpoint
ROUTE_NONE = "none"  # attached, and no endpoint set: nobody here can compress it


def is_attached(origin: str | None) -> bool:
    """Whether a row of this origin is the attached platform's thread."""
    return origin == ORIGIN_ATTACHED


def attached_rows() -> sa.ColumnElement[bool]:
    """The SQL filter for the attached platform's threads."""
    return Conversation.origin == ORIGIN_ATTACHED


def own_rows() -> sa.ColumnElement[bool]:
    """The SQL filter for our own threads."""
    return Conversation.origin != ORIGIN_ATTACHED


def origin_name(origin: str | None) -> str:
    """`ATTACHED_NAME` or `OWN_NAME`: the label of metrics, alerts and alert rule scopes."""
    return ATTACHED_NAME if is_attached(origin) else OWN_NAME


def named_attached(name: str | None) -> bool:
    """Whether an `origin_name` kept in a row (an alert's ``platform``) is the platform's."""
    return name == ATTACHED_NAME


def origin_name_sql() -> sa.ColumnElement[str]:
    """`origin_name` in SQL, for a GROUP BY."""
    return sa.case((attached_rows(), ATTACHED_NAME), else_=OWN_NAME)


def origin_label(origin: str | None, platform: str | None) -> str:
    """What a page and the CLI call a thread's source: "ours" or "attached: <platform>"."""
    return attached_label(platform) if is_attached(origin) else "ours"


def attached_platform(session: Session) -> str | None:
    """The attached platform's label (host:port/database): the newest scan's source, or None."""
    return session.scalar(
        sa.select(ScanWatermark.source).order_by(ScanWatermark.scanned_at.desc()).limit(1)
    )


def compress_route(origin: str | None, settings: Settings) -> str:
    """Where a compress of a thread of this origin goes (`ROUTE_*`)."""
    if not is_attached(origin):
        return ROUTE_HERE
    return ROUTE_PLATFORM if settings.platform_configured else ROUTE_NONE


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

    def route(self, *, attached: bool) -> str:
        """Where a compress of a thread goes (`ROUTE_*`): ``attached`` is the row's flag."""
        if not attached:
            return ROUTE_HERE
        return ROUTE_PLATFORM if self.platform_configured else ROUTE_NONE

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
