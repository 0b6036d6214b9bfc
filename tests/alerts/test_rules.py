"""Alert rules (yuxi_dash.alerts.rules): admin-only, validated, every write and refusal audited."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.alerts.builders import ADMIN, OPERATOR
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.alerts import rules
from yuxi_dash.errors import Forbidden, InvalidInput
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry


def rule_audit() -> list[str]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.scalars(
            sa.select(AuditEntry).where(AuditEntry.action == "alert_rule").order_by(AuditEntry.id)
        ).all()
        return [row.outcome for row in rows]


def test_add_update_delete_audited(db_url: str) -> None:
    added = rules.add_rule(ADMIN, name="hot", for_seconds=30, severity="critical")
    assert (added.fire_at, added.clear_at, added.for_seconds) == (0.85, 0.80, 30)
    updated = rules.update_rule(ADMIN, "hot", fire_at=0.9, enabled=False)
    assert (updated.fire_at, updated.enabled) == (0.9, False)
    rules.delete_rule(ADMIN, "hot")
    assert rules.list_rules() == []
    assert rule_audit() == ["created", "updated", "deleted"]


@pytest.mark.parametrize(
    "fields",
    [
        {"fire_at": 0.8, "clear_at": 0.8},  # clear_at must be below fire_at
        {"fire_at": float("nan")},
        {"severity": "page-everyone"},
        {"for_seconds": -1},
        {"scope": "agent"},  # without an agent slug
        {"compressible_only": "yes"},
    ],
)
def test_bad_rules_refused_and_audited(db_url: str, fields: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        rules.add_rule(ADMIN, name="bad", **fields)  # type: ignore[arg-type]
    assert rules.list_rules() == []
    assert rule_audit() == ["refused"]


def test_operator_may_not_write_rules(db_url: str) -> None:
    with pytest.raises(Forbidden):
        rules.add_rule(OPERATOR, name="hot")
    rules.add_rule(ADMIN, name="hot")
    with pytest.raises(Forbidden):
        rules.update_rule(OPERATOR, "hot", fire_at=0.95)
    with pytest.raises(Forbidden):
        rules.delete_rule(OPERATOR, "hot")
    assert rules.list_rules()[0].fire_at == 0.85
    assert rule_audit() == ["refused", "created", "refused", "refused"]


def test_compressible_only_is_on_for_new_rules_changeable_and_audited(db_url: str) -> None:
    assert rules.add_rule(ADMIN, name="hot").compressible_only is True
    assert rules.add_rule(ADMIN, name="all", compressible_only=False).compressible_only is False
    assert rules.update_rule(ADMIN, "hot", compressible_only=False).compressible_only is False
    assert rules.update_rule(ADMIN, "hot", fire_at=0.9).compressible_only is False  # kept
    assert [(r.name, r.compressible_only) for r in rules.list_rules()] == [
        ("all", False), ("hot", False),
    ]  # fmt: skip
    wait_for_pending_audit()
    with session_scope() as session:
        details = session.scalars(
            sa.select(AuditEntry.detail)
            .where(AuditEntry.action == "alert_rule")
            .order_by(AuditEntry.id)
        ).all()
    assert [d["compressible_only"] for d in details] == [True, False, False, False]
