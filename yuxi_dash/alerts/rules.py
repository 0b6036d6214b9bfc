"""Alert rules: validated, admin-only, every write (and every refusal) audited.

A rule names its scope (``all`` threads, one ``agent`` slug, the ``attached``
platform's threads or our ``own``), fires at or above ``fire_at`` of the
summary threshold and resolves only below ``clear_at`` (which must be lower:
the gap is the hysteresis), after the condition held ``for_seconds``.
``compressible_only`` (on by default) leaves out the threads nobody can compress
(`store.origin`). Deleting a rule leaves its alerts to the next evaluation, which resolves them.

A rule's ``kind`` (fixed) says what ``fire_at`` measures: ``pressure`` (the above);
``cited_evidence_lost``, the cited items the newest compression record lost (fires at
``fire_at``, default 1; resolves below ``clear_at``, default 1: a count needs no
hysteresis, so it may equal ``fire_at``); ``forecast_crossing``, minutes until 100%
(`alerts.forecast_crossing`; ``fire_at`` the horizon, default 60, at most a day;
``clear_at`` defaults to it, never below it, and moves with it when it equalled it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.alerts.forecast_crossing import DEFAULT_HORIZON_MINUTES, MAX_HORIZON_MINUTES
from yuxi_dash.errors import AlertRuleNotFound, InvalidInput
from yuxi_dash.printable_record import Record
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import (
    ALERT_KIND_CITED_LOST,
    ALERT_KIND_FORECAST,
    ALERT_KIND_PRESSURE,
    ALERT_KINDS,
    ALERT_SCOPES,
    ALERT_SEVERITIES,
    AlertRule,
    utcnow,
)

RULE_ACTION = "alert_rule"
DEFAULT_FIRE_AT = 0.85
DEFAULT_CLEAR_AT = 0.80
# per kind: (fire_at, clear_at) when the rule does not say (forecast_crossing: clear_at = fire_at)
DEFAULTS = {
    ALERT_KIND_PRESSURE: (DEFAULT_FIRE_AT, DEFAULT_CLEAR_AT),
    ALERT_KIND_CITED_LOST: (1, 1),
    ALERT_KIND_FORECAST: (DEFAULT_HORIZON_MINUTES, DEFAULT_HORIZON_MINUTES),
}
MAX_FOR_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class RuleInfo(Record):
    id: int
    name: str
    scope: str
    agent: str | None
    fire_at: float
    clear_at: float
    for_seconds: int
    severity: str
    enabled: bool
    updated_at: datetime
    compressible_only: bool = True  # only threads that can be compressed (`capability`)
    kind: str = ALERT_KIND_PRESSURE  # what fire_at measures (`ALERT_KINDS`)


def rule_info(rule: AlertRule) -> RuleInfo:
    return RuleInfo(
        id=rule.id,
        name=rule.name,
        scope=rule.scope,
        agent=rule.agent_slug,
        fire_at=rule.fire_at,
        clear_at=rule.clear_at,
        for_seconds=rule.for_seconds,
        severity=rule.severity,
        enabled=rule.enabled,
        updated_at=rule.updated_at,
        compressible_only=rule.compressible_only,
        kind=rule.kind,
    )


def _checked(fields: dict[str, Any]) -> dict[str, Any]:
    """The rule's fields after the input rules; InvalidInput names the field, never the value."""
    out = dict(fields)
    out["name"] = validation.identifier(out["name"], "rule name")
    if out["kind"] not in ALERT_KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(ALERT_KINDS)}")
    top = MAX_HORIZON_MINUTES if out["kind"] == ALERT_KIND_FORECAST else 100.0  # minutes
    out["fire_at"] = validation.number(out["fire_at"], "fire_at", minimum=0.01, maximum=top)
    out["clear_at"] = validation.number(out["clear_at"], "clear_at", minimum=0.0, maximum=top)
    if out["kind"] == ALERT_KIND_FORECAST and out["clear_at"] < out["fire_at"]:
        raise InvalidInput("clear_at must not be below fire_at (minutes: it resolves beyond it)")
    if out["kind"] == ALERT_KIND_CITED_LOST and out["clear_at"] > out["fire_at"]:
        raise InvalidInput("clear_at must not be above fire_at")
    if out["kind"] == ALERT_KIND_PRESSURE and out["clear_at"] >= out["fire_at"]:
        raise InvalidInput("clear_at must be below fire_at")
    out["for_seconds"] = validation.integer(
        out["for_seconds"], "for_seconds", minimum=0, maximum=MAX_FOR_SECONDS
    )
    if out["severity"] not in ALERT_SEVERITIES:
        raise InvalidInput(f"severity must be one of {', '.join(ALERT_SEVERITIES)}")
    agent = out.get("agent_slug")
    if agent is not None:
        out["agent_slug"] = validation.identifier(agent, "agent slug")
        out["scope"] = "agent"
    elif out["scope"] == "agent":
        raise InvalidInput("scope agent needs an agent slug")
    if out["scope"] not in ALERT_SCOPES:
        raise InvalidInput(f"scope must be one of {', '.join(ALERT_SCOPES)}")
    for flag in ("enabled", "compressible_only"):
        if not isinstance(out[flag], bool):
            raise InvalidInput(f"{flag} must be true or false")
    return out


def _find(session: Session, name: str) -> AlertRule:
    rule = session.scalar(sa.select(AlertRule).where(AlertRule.name == name))
    if rule is None:
        raise AlertRuleNotFound(f"no alert rule named {name}")
    return rule


def _audit(session: Session, actor: Actor, rule: AlertRule, outcome: str) -> None:
    record_audit(
        actor=actor.id,
        action=RULE_ACTION,
        target=f"rule:{rule.name}",
        outcome=outcome,
        detail={"rule_id": rule.id, "via": actor.via, **_numbers(rule)},
        session=session,
    )


def _numbers(rule: AlertRule) -> dict[str, Any]:
    return {
        "scope": rule.scope,
        "agent": rule.agent_slug,
        "fire_at": rule.fire_at,
        "clear_at": rule.clear_at,
        "for_seconds": rule.for_seconds,
        "severity": rule.severity,
        "enabled": rule.enabled,
        "compressible_only": rule.compressible_only,
        "kind": rule.kind,
    }


def add_rule(
    actor: Actor,
    *,
    name: str,
    fire_at: float | None = None,
    clear_at: float | None = None,
    for_seconds: int = 0,
    scope: str = "all",
    agent: str | None = None,
    severity: str = "warning",
    enabled: bool = True,
    compressible_only: bool = True,
    kind: str = ALERT_KIND_PRESSURE,
    settings: Settings | None = None,
) -> RuleInfo:
    """Create a rule (admin). A taken name is InvalidInput.

    ``fire_at`` and ``clear_at`` default by ``kind`` (`DEFAULTS`)."""
    settings = settings or get_settings()
    with audited_refusals(
        actor=actor.id, action=RULE_ACTION, target=f"rule:{name}", settings=settings
    ):
        require_role(actor, Role.ADMIN, action="adding an alert rule")
        fire_default, clear_default = DEFAULTS.get(kind, DEFAULTS[ALERT_KIND_PRESSURE])
        if kind == ALERT_KIND_FORECAST and fire_at is not None:
            clear_default = fire_at  # resolves beyond the horizon it fires within
        fields = _checked(
            {
                "name": name,
                "kind": kind,
                "fire_at": fire_default if fire_at is None else fire_at,
                "clear_at": clear_default if clear_at is None else clear_at,
                "for_seconds": for_seconds,
                "scope": scope,
                "agent_slug": agent,
                "severity": severity,
                "enabled": enabled,
                "compressible_only": compressible_only,
            }
        )
        with session_scope(settings) as session:
            if session.scalar(sa.select(AlertRule.id).where(AlertRule.name == fields["name"])):
                raise InvalidInput("an alert rule with that name exists")
            rule = AlertRule(**fields)
            session.add(rule)
            session.flush()
            _audit(session, actor, rule, "created")
            return rule_info(rule)


def update_rule(
    actor: Actor, name: str, *, settings: Settings | None = None, **changes: Any
) -> RuleInfo:
    """Change some fields of a rule (admin); None values are left as they are (a forecast
    rule's clear_at equal to its fire_at moves with a new fire_at)."""
    settings = settings or get_settings()
    with audited_refusals(
        actor=actor.id, action=RULE_ACTION, target=f"rule:{name}", settings=settings
    ):
        require_role(actor, Role.ADMIN, action="updating an alert rule")
        name = validation.identifier(name, "rule name")
        with session_scope(settings) as session:
            rule = _find(session, name)
            current = {"name": rule.name, **_numbers(rule)}
            current["agent_slug"] = current.pop("agent")
            if changes.get("agent") is not None:
                current["agent_slug"] = changes.pop("agent")
            changes.pop("agent", None)
            if changes.pop("kind", None) not in (None, rule.kind):
                raise InvalidInput("a rule's kind cannot change: add a rule of the other kind")
            unknown = set(changes) - set(current)
            if unknown:
                raise InvalidInput("unknown rule field")
            moves = rule.kind == ALERT_KIND_FORECAST and rule.clear_at == rule.fire_at
            if moves and changes.get("clear_at") is None and changes.get("fire_at") is not None:
                changes["clear_at"] = changes["fire_at"]  # it resolved beyond its horizon: still
            current.update({k: v for k, v in changes.items() if v is not None})
            if current["scope"] != "agent" and changes.get("scope") is not None:
                current["agent_slug"] = None
            fields = _checked(current)
            for key, value in fields.items():
                setattr(rule, key, value)
            rule.updated_at = utcnow()
            session.flush()
            _audit(session, actor, rule, "updated")
            return rule_info(rule)


def delete_rule(actor: Actor, name: str, *, settings: Settings | None = None) -> RuleInfo:
    """Delete a rule (admin); the next evaluation resolves the alerts it had open."""
    settings = settings or get_settings()
    with audited_refusals(
        actor=actor.id, action=RULE_ACTION, target=f"rule:{name}", settings=settings
    ):
        require_role(actor, Role.ADMIN, action="deleting an alert rule")
        name = validation.identifier(name, "rule name")
        with session_scope(settings) as session:
            rule = _find(session, name)
            info = rule_info(rule)
            _audit(session, actor, rule, "deleted")
            session.delete(rule)
            return info


def list_rules(settings: Settings | None = None) -> list[RuleInfo]:
    """Every rule, by name (anyone may read)."""
    with session_scope(settings) as session:
        rows = session.scalars(sa.select(AlertRule).order_by(AlertRule.name)).all()
        return [rule_info(rule) for rule in rows]
