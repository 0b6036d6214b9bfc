"""Forget a user (yuxi_dash.memory.support.forget): deleted, verified, audited; refusals change nothing.

Real FalkorDB (graphs written with graphiti-core's classes), real Redis at
127.0.0.1:6379 db 13 for the hit counters, the real SQLite store for chat
records and the audit log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.fixtures.graph import memory_audit, seed_chat_record
from tests.memory.support_graphs import (
    REDIS_URL,
    SupportUsers,
    add_correction,
    graph_census,
    unique_user,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.demo.flags import write_demo_flags
from yuxi_dash.errors import ConfirmationMismatch, Forbidden, InvalidInput
from yuxi_dash.memory.cache import distributions
from yuxi_dash.memory.graph.client import glob_escape
from yuxi_dash.memory.graph.groups import derive_group_id
from yuxi_dash.memory.support.forget import FORGET_ACTION, forget_user, hit_keys
from yuxi_dash.memory.views.gate import gates_for
from yuxi_dash.memory.views.ratification import hits_key
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ChatMessage, Conversation, MemoryCorrection

ADMIN = Actor(id="admin@example.com", role=Role.ADMIN)
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR)


@pytest.fixture
def support_settings(memory_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("YUXI_DASH_REDIS_URL", REDIS_URL)
    get_settings.cache_clear()
    return get_settings()


@pytest.fixture
def users(graph_client, support_settings) -> Iterator[SupportUsers]:
    seeded = SupportUsers(graph_client)
    yield seeded
    seeded.close()


def _chat_rows(settings: Settings, user_id: str) -> int:
    with session_scope(settings) as session:
        return int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(ChatMessage)
                .join(Conversation, Conversation.thread_id == ChatMessage.thread_id)
                .where(Conversation.user_id == user_id)
            )
        )


def test_forget_deletes_verifies_and_audits(
    users, graph_client, falkordb_server, support_settings, tmp_path: Path, monkeypatch
) -> None:
    victim = unique_user()
    other = victim + "_b"  # the victim's id is a prefix of this one: its keys must survive
    seeded = users.seed(victim)
    users.seed(other)
    seed_chat_record(support_settings, victim)
    fact = seeded["graph"].facts[0].uuid
    add_correction(support_settings, victim, fact)
    kept = add_correction(support_settings, other, fact)
    # memory gated off for the victim (4th user of the demo flag file): forget still works
    flags = write_demo_flags(["p0", "p1", "p2", victim], tmp_path / "flags.json")
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(flags))
    get_settings.cache_clear()
    assert not gates_for(victim).memory_on

    group = derive_group_id(victim)
    before = graph_census(falkordb_server, group)
    assert before["facts"] > 0 and before["communities"] > 0 and before["episodes"] > 0
    other_before = users.counts(other)
    chat_before = _chat_rows(support_settings, victim)
    assert chat_before > 0
    # the distributions other dashboard processes are served from (entity names, fact texts)
    shared = distributions.get_shared_store(support_settings.redis_url)
    assert shared is not None
    names = list(distributions.PARTS)
    for user in (victim, other):
        distributions.parts(graph_client, derive_group_id(user), names, shared=shared)
    assert len(shared.keys(group)) == len(names)

    report = forget_user(victim, victim, actor=ADMIN)

    deleted = report.deleted
    assert report.verified
    assert report.remaining == {"graph": 0, "redis_keys": 0, "corrections": 0, "shared_parts": 0}
    assert deleted["shared_parts"] == len(names)
    assert shared.keys(group) == []
    assert len(shared.keys(derive_group_id(other))) == len(names)
    shared.forget(derive_group_id(other))
    assert deleted["corrections"] == 1
    assert deleted["entities"] == before["entities"]
    assert deleted["facts"] == before["facts"]
    assert deleted["episodes"] == before["episodes"]
    assert deleted["communities"] == before["communities"]
    assert deleted["mentions"] == before["mentions"]
    assert deleted["redis_keys"] == seeded["hit_keys"] > 0
    assert deleted["nodes"] == before["entities"] + before["episodes"] + before["communities"]
    # gone: the graph key, the hit counters; graphiti-core finds nothing for the group
    assert not graph_client.graph_exists(group)
    assert group not in graph_client.list_graphs()
    assert hit_keys(users.redis, victim) == []
    assert graph_census(falkordb_server, group) == dict.fromkeys(before, 0)
    # untouched: the other user's graph and counters, the victim's chat record
    assert users.counts(other) == other_before
    assert _chat_rows(support_settings, victim) == chat_before
    with session_scope(support_settings) as session:
        left = session.scalars(sa.select(MemoryCorrection.id)).all()
    assert left == [kept]
    rows = [r for r in memory_audit(support_settings, victim) if r.action == FORGET_ACTION]
    assert [(r.id, r.actor, r.outcome) for r in rows] == [(report.audit_id, ADMIN.id, "ok")]
    assert rows[0].detail["deleted"] == deleted and rows[0].detail["verified"] is True


def test_forget_a_user_with_nothing_stored_is_ok_and_verified(users, support_settings) -> None:
    report = forget_user("nobody_here", "nobody_here", actor=ADMIN)
    assert report.verified and sum(report.deleted.values()) == 0


@pytest.mark.parametrize(
    ("actor", "confirmation", "error", "code"),
    [
        (OPERATOR, "SAME", Forbidden, "forbidden"),
        (ADMIN, "", ConfirmationMismatch, "confirmation_mismatch"),
        (ADMIN, "SAME ", ConfirmationMismatch, "confirmation_mismatch"),
        (ADMIN, "UPPER", ConfirmationMismatch, "confirmation_mismatch"),
        (ADMIN, "PREFIX", ConfirmationMismatch, "confirmation_mismatch"),
    ],
)
def test_refusals_change_nothing_and_are_audited(
    users, support_settings, actor, confirmation, error, code
) -> None:
    victim = unique_user()
    users.seed(victim)
    typed = {
        "SAME": victim,
        "SAME ": victim + " ",
        "UPPER": victim.upper(),
        "PREFIX": victim[:-1],
        "": "",
    }[confirmation]
    before = users.counts(victim)
    with pytest.raises(error) as caught:
        forget_user(victim, typed, actor=actor)
    assert caught.value.code == code
    assert users.counts(victim) == before and before["keys"] > 0
    rows = memory_audit(support_settings, victim)
    assert [(r.action, r.outcome, r.detail["code"]) for r in rows] == [
        (FORGET_ACTION, "refused", code)
    ]


def test_malformed_user_id_is_refused_and_audited(support_settings) -> None:
    with pytest.raises(InvalidInput):
        forget_user("a*b", "a*b", actor=ADMIN)
    rows = memory_audit(support_settings, "a*b")
    assert [(r.outcome, r.detail["code"]) for r in rows] == [("refused", "invalid_input")]


def test_glob_escape_makes_the_prefix_literal(users) -> None:
    users.redis.set("mem:hits:a?c:x", 1)  # no user id holds '?'; a raw pattern would match both
    users.redis.set("mem:hits:abc:x", 1)
    try:
        assert glob_escape("a?c[*]\\") == "a\\?c\\[\\*\\]\\\\"
        found = list(users.redis.scan_iter(match=glob_escape("mem:hits:a?c:") + "*"))
        assert found == [b"mem:hits:a?c:x"]
        assert hits_key("u", "e") == "mem:hits:u:e"
    finally:
        users.redis.delete("mem:hits:a?c:x", "mem:hits:abc:x")
