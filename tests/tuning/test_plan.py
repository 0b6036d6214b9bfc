"""yuxi_dash.tuning.plan: a run is checked and planned in one audited scope.

A refusal (role, agent, a setting outside the agent's range, the workers) is one audit row
and runs nothing. The proposal is checked against the platform's ranges
(`validation.AGENT_INT_RANGES`), the settings in force are not; an agent without the
compression middleware is replayed in force as a pass-through.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from tests.service.builders import OPERATOR, VIEWER
from tests.tuning.fleet_builders import AGENT, simulated_fleet
from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.errors import AgentNotFound, Forbidden, InvalidInput, YuxiDashError
from yuxi_dash.service import upsert_agent
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry
from yuxi_dash.tuning.fleet import ACTION
from yuxi_dash.tuning.plan import plan_tuning, run_tuning
from yuxi_dash.validation import AGENT_INT_RANGES


def _outcomes() -> list[tuple[str, str | None]]:
    wait_for_pending_audit()
    with session_scope() as session:
        rows = session.execute(
            sa.select(AuditEntry.outcome, AuditEntry.detail)
            .where(AuditEntry.action == ACTION)
            .order_by(AuditEntry.id)
        ).all()
    return [(outcome, (detail or {}).get("code")) for outcome, detail in rows]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"actor": VIEWER}, Forbidden),
        ({"summary_threshold_k": 0}, InvalidInput),
        ({"summary_threshold_k": 40}, InvalidInput),  # 40,960 tokens: above the 32,000 window
        ({"tool_result_token_limit": -3}, InvalidInput),
        ({"tool_result_token_limit": 10_000_001}, InvalidInput),
        ({"keep_messages": 0}, InvalidInput),  # the platform keeps at least one
        ({"sample": 0}, InvalidInput),
        ({"workers": 0}, InvalidInput),
        ({"workers": 65}, InvalidInput),
        ({"agent_slug": "nobody"}, AgentNotFound),
    ],
)
def test_a_refusal_is_one_audit_row_and_runs_nothing(
    kwargs: dict[str, Any], error: type[YuxiDashError]
) -> None:
    simulated_fleet(threads=1, turns=2)
    call: dict[str, Any] = {"agent_slug": AGENT, "actor": OPERATOR, **kwargs}
    with pytest.raises(error):
        plan_tuning(call.pop("agent_slug"), **call)
    assert _outcomes() == [("refused", error.code)]


def test_the_proposal_has_the_platforms_ranges_and_the_settings_in_force_are_not_rechecked() -> (
    None
):
    simulated_fleet(threads=1, turns=2)
    with session_scope() as session:  # a valid agent with a limit the old lab capped
        upsert_agent(session, AGENT, summary_tool_result_token_limit=5_000_000)
    run = plan_tuning(AGENT, actor=OPERATOR, tool_result_token_limit=10_000_000)
    assert run.current_settings.tool_result_token_limit == 5_000_000
    assert run.proposed_settings.tool_result_token_limit == 10_000_000
    assert AGENT_INT_RANGES["summary_keep_messages"][0] == 1
    assert _outcomes() == [("pending", None)]  # the run's row, before any thread is read


def test_an_agent_without_compression_is_a_pass_through_in_force() -> None:
    simulated_fleet(threads=2, turns=8, capabilities=())
    result = run_tuning(AGENT, actor=OPERATOR, summary_threshold_k=4)
    assert result.current.compressions == 0 and result.current.offload_only_passes == 0
    assert result.proposed.compressions > 0
    assert any("runs no compression middleware" in note for note in result.notes)
