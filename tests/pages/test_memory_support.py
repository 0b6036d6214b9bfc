"""AppTest: the Memory support page — prepare and download a bundle, forget a user (admins)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from streamlit.elements.empty import EmptyMixin
from streamlit.elements.progress import ProgressMixin

from tests.fixtures.graph import memory_audit
from tests.memory.support_graphs import REDIS_URL, SupportUsers, unique_user
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.settings import get_settings
from yuxi_dash.ui.memory_support import (
    BUNDLE_TTL_SECONDS,
    bundle_dir,
    sweep_bundles,
)


@pytest.fixture
def users(memory_pages, graph_client, monkeypatch) -> Iterator[SupportUsers]:
    monkeypatch.setenv("YUXI_DASH_REDIS_URL", REDIS_URL)
    get_settings.cache_clear()
    seeded = SupportUsers(graph_client)
    yield seeded
    seeded.close()


def _button(at, label: str):
    return next(b for b in at.button if b.label == label)


@pytest.fixture
def bar_updates(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float | None, str | None]]:
    """Every update of a progress bar and every element emptied while the page runs, in order.

    A spy on Streamlit's own element methods (it calls through), so the page draws as usual.
    """
    events: list[tuple[str, float | None, str | None]] = []
    real_progress, real_empty = ProgressMixin.progress, EmptyMixin.empty

    def progress(self: Any, value: Any, text: str | None = None, **kwargs: Any) -> Any:
        events.append(("progress", float(value), None if text is None else str(text)))
        return real_progress(self, value, text, **kwargs)

    def empty(self: Any) -> Any:
        events.append(("empty", None, None))
        return real_empty(self)

    monkeypatch.setattr(ProgressMixin, "progress", progress)
    monkeypatch.setattr(EmptyMixin, "empty", empty)
    return events


def test_prepare_and_download_a_bundle(memory_pages, graph_client, bar_updates) -> None:
    at = memory_pages("memory_support.py", "alice_chen")
    assert not at.exception
    assert memory_audit(get_settings(), "alice_chen") == []  # choosing a user reads no memory
    bar_updates.clear()
    _button(at, "Prepare bundle").click().run()
    assert not at.exception
    facts = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN count(e)")
    # the bar showed the facts done of the total, then each section, then went
    shown = [(value, text) for kind, value, text in bar_updates if kind == "progress"]
    assert [text for _, text in shown] == [
        f"Writing the bundle: 0 of {facts:,} facts",
        f"Writing the bundle: {facts:,} of {facts:,} facts",
        "Writing the bundle: the recent episodes",
        "Writing the bundle: the corrections",
        "Writing the bundle: the threads",
        "Writing the bundle: done",
    ]
    fractions = [value for value, _ in shown]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert 0.0 < fractions[1] < 1.0  # part way once the facts are written
    assert bar_updates[-1][0] == "empty"  # emptied after its last update
    rows = memory_audit(get_settings(), "alice_chen")
    assert [(r.action, r.outcome) for r in rows] == [("memory.bundle", "ok"), ("memory.view", "ok")]
    caption = next(c.value for c in at.caption if "tool results" in c.value)
    assert caption.startswith(f"{facts:,} facts") and caption.endswith(f"audit row {rows[0].id}")
    assert not at.get("progress")  # the progress bar goes once the bundle is written
    (download,) = at.get("download_button")
    assert download.proto.label == "Download bundle"
    prepared = at.session_state["memory_support_bundle"]
    assert json.loads(prepared.read())["fact_count"] == facts
    assert prepared.path.parent == bundle_dir() and bundle_dir().stat().st_mode & 0o077 == 0
    # a bundle older than the TTL is swept on the next prepare
    assert sweep_bundles(now=time.time() + BUNDLE_TTL_SECONDS + 1) >= 1
    assert not prepared.path.exists()


def test_forget_needs_the_typed_user_id(memory_pages, users, graph_client) -> None:
    victim = unique_user()
    users.seed(victim)
    at = memory_pages("memory_support.py", victim)
    assert not at.exception
    assert "Chat records, thread state and offloaded tool results are not memory" in (
        at.warning[0].value
    )
    at.text_input(key="forget_confirm").input(victim.upper()).run()
    _button(at, "Forget this user").click().run()
    assert "the confirmation must be the user id exactly" in at.error[0].value
    assert graph_client.graph_exists(derive_group_id(victim))

    at.text_input(key="forget_confirm").input(victim).run()
    _button(at, "Forget this user").click().run()
    assert not at.exception
    assert at.success[0].value.startswith(f"Forgot {victim}: ")
    assert "Verified: nothing is left" in at.success[0].value
    assert not graph_client.graph_exists(derive_group_id(victim))
    rows = memory_audit(get_settings(), victim)
    assert [(r.action, r.outcome) for r in rows] == [
        ("memory.forget", "ok"),
        ("memory.forget", "refused"),
    ]


def test_viewers_get_no_forget_section(memory_pages, monkeypatch) -> None:
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")
    get_settings.cache_clear()
    at = memory_pages("memory_support.py", "alice_chen")
    assert not at.exception
    assert not [b for b in at.button if b.label == "Forget this user"]
    assert any("An admin can forget" in c.value for c in at.caption)


def test_forget_is_the_least_prominent_control_and_comes_last(memory_pages) -> None:
    """Forgetting cannot be undone: it sits last, folded away, as a tertiary button after the
    typed confirmation; the bundle stays the page's main action."""
    at = memory_pages("memory_support.py", "alice_chen")
    assert not at.exception
    forget = _button(at, "Forget this user")
    assert forget.proto.type == "tertiary"
    assert at.button[-1].label == "Forget this user"  # after Prepare bundle
    (folded,) = [e for e in at.expander if e.label == "Forget this user"]
    assert not folded.proto.expanded
    inside = [b.label for b in folded.button]
    assert inside == ["Forget this user"]
    assert [t.key for t in folded.text_input] == ["forget_confirm"]  # its typed confirmation
    assert not [h for h in at.subheader if h.value == "Forget this user"]
