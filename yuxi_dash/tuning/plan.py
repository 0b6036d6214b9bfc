"""A tuning run planned and checked: `plan_tuning`, and `run_tuning`, the whole run at once.

`plan_tuning` checks, inside one audited scope (a refusal is one audit row and nothing
runs): the role (operator), the agent, the proposal (each field within the agent's range,
`validation.AGENT_INT_RANGES`, the threshold under the agent's window) and the workers.
The settings in force are the agent's as stored, not range-checked again; an attached
platform's agent with no row here has the defaults (`yuxi_dash.agents`), and whether it
compresses is unknown (said in a note). An agent without the compression capability is
replayed in force as a pass-through. It lists the agent's threads (`tuning.recorded`),
picks them all or a stratified sample ordered a stratum at a time (`tuning.sample`), and
writes the run's one audit row as "pending" before any thread is read; the run
(`tuning.fleet.TuningRun`) completes it.
"""

from __future__ import annotations

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, require_role
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.compression.middleware import summary_trigger
from yuxi_dash.errors import AgentNotFound
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent
from yuxi_dash.tuning import sample as sampling
from yuxi_dash.tuning.fleet import (
    ACTION,
    MAX_SAMPLE,
    MAX_WORKERS,
    RUN_ROLE,
    Progress,
    StopFlag,
    TuningRun,
)
from yuxi_dash.tuning.recorded import thread_rows
from yuxi_dash.tuning.replay import CompressionSettings
from yuxi_dash.tuning.report import TuningResult


def _field(agent: Agent | None, name: str) -> int:
    """An agent's setting, or the default (`yuxi_dash.agents`) when it has no row here."""
    return int(AGENT_DEFAULTS[name] if agent is None else getattr(agent, name))


def _proposal(
    current: CompressionSettings,
    summary_threshold_k: int | None,
    tool_result_token_limit: int | None,
    keep_messages: int | None,
) -> CompressionSettings:
    """The proposal, each field checked against the agent's range (the ones left out: as now)."""

    def pick(value: int | None, default: int, name: str) -> int:
        return default if value is None else validation.agent_int(name, value)

    return CompressionSettings(
        summary_threshold_k=pick(
            summary_threshold_k, current.summary_threshold_k, "summary_threshold"
        ),
        tool_result_token_limit=pick(
            tool_result_token_limit,
            current.tool_result_token_limit,
            "summary_tool_result_token_limit",
        ),
        keep_messages=pick(keep_messages, current.keep_messages, "summary_keep_messages"),
    )


def _notes(slug: str, agent: Agent | None) -> list[str]:
    """What the plan says of the settings in force."""
    if agent is None:
        return [
            f"agent {slug} has no row here: the settings in force are the defaults, and "
            "whether it compresses is unknown (replayed as if it does)"
        ]
    if not agent.compression_capable:
        return [
            f"agent {slug} runs no compression middleware: the settings in force are "
            "replayed as a pass-through, nothing offloaded or summarized"
        ]
    return []


def plan_tuning(
    agent_slug: str,
    *,
    actor: Actor,
    summary_threshold_k: int | None = None,
    tool_result_token_limit: int | None = None,
    keep_messages: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    workers: int = 1,
    settings: Settings | None = None,
) -> TuningRun:
    """Check and plan a replay of the agent's threads (refusals audited, nothing run)."""
    settings = settings or get_settings()
    target = f"agent:{agent_slug}"
    with audited_refusals(
        actor=actor.id, action=ACTION, target=target, detail={"look": True}, settings=settings
    ):
        require_role(actor, RUN_ROLE, action="replaying threads in the tuning lab")
        slug = validation.identifier(agent_slug, "agent")
        if sample is not None:
            sample = validation.integer(sample, "sample", minimum=1, maximum=MAX_SAMPLE)
        workers = validation.integer(workers, "workers", minimum=1, maximum=MAX_WORKERS)
        with session_scope(settings) as session:
            agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
            rows = thread_rows(session, slug)
            if agent is None and not rows:
                raise AgentNotFound(f"agent {slug} not found")
            current = CompressionSettings(  # an attached platform's agent has no row: defaults
                summary_threshold_k=_field(agent, "summary_threshold"),
                tool_result_token_limit=_field(agent, "summary_tool_result_token_limit"),
                keep_messages=_field(agent, "summary_keep_messages"),
            )
            window = _field(agent, "context_window")
            compresses = agent is None or agent.compression_capable
            notes = _notes(slug, agent)
        proposed = _proposal(current, summary_threshold_k, tool_result_token_limit, keep_messages)
        summary_trigger(context_window=window, summary_threshold_k=proposed.summary_threshold_k)
    keys = {n: sampling.stratum(row.pressure_ratio, row.model_calls) for n, row in enumerate(rows)}
    groups = sampling.stratify(rows, keys)
    planned = rows
    if sample is not None:
        planned = sampling.interleave(sampling.draw(groups, sample, seed))
    run = TuningRun(
        agent=slug,
        actor=actor,
        current_settings=current,
        proposed_settings=proposed,
        planned=planned,
        listed=len(rows),
        settings=settings,
        sample=sample,
        strata_sizes={h: len(members) for h, members in groups.items()},
        current_compresses=compresses,
        workers=workers,
        notes=notes,
    )
    run.audit_id = record_audit(
        actor=actor.id,
        action=ACTION,
        target=f"agent:{slug}",
        outcome="pending",
        detail={"look": True, **run.plan_detail()},
        settings=settings,
    )
    return run


def run_tuning(
    agent_slug: str,
    *,
    actor: Actor,
    summary_threshold_k: int | None = None,
    tool_result_token_limit: int | None = None,
    keep_messages: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    settings: Settings | None = None,
    on_progress: Progress | None = None,
    should_stop: StopFlag | None = None,
    workers: int = 1,
) -> TuningResult:
    """Plan, replay every planned thread (or until ``should_stop``), and finish."""
    run = plan_tuning(
        agent_slug,
        actor=actor,
        summary_threshold_k=summary_threshold_k,
        tool_result_token_limit=tool_result_token_limit,
        keep_messages=keep_messages,
        sample=sample,
        seed=seed,
        workers=workers,
        settings=settings,
    )
    run.step(should_stop=should_stop, on_progress=on_progress)
    return run.finish()
