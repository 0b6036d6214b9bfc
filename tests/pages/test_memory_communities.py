"""AppTest: communities page — shown only where graphiti-communities-enabled is on."""

from __future__ import annotations

from tests.fixtures.graph import memory_audit
from yuxi_dash.settings import get_settings


def test_communities_on(memory_pages) -> None:
    at = memory_pages("memory_communities.py", "alice_chen")
    assert not at.exception
    assert "would run" in at.success[0].value
    assert len(at.dataframe[0].value) == 4
    assert len(at.expander) == 4


def test_communities_off_shows_the_gate(memory_pages) -> None:
    at = memory_pages("memory_communities.py", "bruno_silva")
    assert not at.exception
    assert (
        "graphiti-communities-enabled is off (no target or rule matched: the flag's default)"
        in at.warning[0].value
    )
    assert not at.dataframe
    assert [r.outcome for r in memory_audit(get_settings(), "bruno_silva")] == ["gated_off"]
