"""Every memory page writes an audit row for the user it shows (and the view it is)."""

from __future__ import annotations

import pytest

from tests.fixtures.graph import memory_audit
from yuxi_dash.settings import get_settings

PAGES = {
    "memory_overview.py": "overview",
    "memory_entities.py": "entities",
    "memory_facts.py": "facts",
    "memory_ratification.py": "ratification",
    "memory_communities.py": "communities",
    "memory_episodes.py": "episodes",
    "memory_chat.py": "chat",
    "memory_warm_context.py": "warm_context",
}
# the Facts page opens on its headline fact: that provenance look is audited too
ALSO = {"memory_facts.py": ["provenance"]}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_page_view_is_audited(memory_pages, page: str) -> None:
    at = memory_pages(page, "elena_rossi")  # memory and communities on for this demo user
    assert not at.exception
    rows = memory_audit(get_settings(), "elena_rossi")
    assert sorted((r.action, r.outcome, r.detail["view"]) for r in rows) == sorted(
        ("memory.view", "ok", view) for view in [PAGES[page], *ALSO.get(page, [])]
    )
    assert {r.actor for r in rows} == {"operator@localhost"}


def test_no_user_chosen_reads_nothing(memory_pages) -> None:
    at = memory_pages("memory_entities.py", None)
    assert not at.exception
    assert "Choose a user" in at.info[0].value
    assert not at.dataframe
