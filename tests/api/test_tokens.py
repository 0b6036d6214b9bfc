"""Service tokens (yuxi_dash.api.service_tokens) on SQLite and the real PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.api.service_tokens import (
    authenticate,
    bearer_token,
    create_token,
    hash_token,
    list_tokens,
    parse_expires_in,
    revoke_token,
)
from yuxi_dash.errors import ApiTokenNotFound, Forbidden, InvalidInput, Unauthorized
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ApiToken, AuditEntry, utcnow

ADMIN = Actor(id="root@example.com", role=Role.ADMIN, via="cli")
OPERATOR = Actor(id="ops@example.com", role=Role.OPERATOR, via="cli")


def _audit() -> list[AuditEntry]:
    wait_for_pending_audit()
    with session_scope() as session:
        return list(session.scalars(sa.select(AuditEntry).order_by(AuditEntry.id)))


def test_a_token_authenticates_as_its_actor_with_its_role(db_url: str) -> None:
    settings = get_settings()
    created = create_token(role="operator", actor_name="ci", by=ADMIN, settings=settings)
    actor = authenticate(created.token, settings)
    assert actor == Actor(id="api:ci", role=Role.OPERATOR, via="api")
    with session_scope() as session:
        row = session.get(ApiToken, created.id)
        assert row is not None and row.hash == hash_token(created.token) and len(row.hash) == 64
    assert [info.id for info in list_tokens(by=ADMIN, settings=settings)] == [created.id]
    assert "token" not in list_tokens(by=ADMIN, settings=settings)[0].to_dict()


def test_unknown_near_and_revoked_tokens_are_unauthorized(db_url: str) -> None:
    settings = get_settings()
    created = create_token(role="admin", actor_name="ci", by=ADMIN, settings=settings)
    for presented in (created.token[:-1], created.token + "x", "", "é" * 10, "y" * 1000):
        with pytest.raises(Unauthorized):
            authenticate(presented, settings)
    info, revoked_now = revoke_token(created.id, by=ADMIN, settings=settings)
    assert revoked_now and info.revoked_at is not None
    with pytest.raises(Unauthorized, match="revoked"):
        authenticate(created.token, settings)
    assert revoke_token(created.id, by=ADMIN, settings=settings)[1] is False  # already


def test_token_management_needs_admin_and_every_refusal_is_audited(db_url: str) -> None:
    settings = get_settings()
    with pytest.raises(Forbidden):
        create_token(role="admin", actor_name="me", by=OPERATOR, settings=settings)
    with pytest.raises(Forbidden):
        list_tokens(by=OPERATOR, settings=settings)
    with pytest.raises(InvalidInput):
        create_token(role="root", actor_name="me", by=ADMIN, settings=settings)
    with pytest.raises(InvalidInput):
        create_token(role="viewer", actor_name="a\x00b", by=ADMIN, settings=settings)
    with pytest.raises(InvalidInput):
        revoke_token("../../etc", by=ADMIN, settings=settings)
    with pytest.raises(ApiTokenNotFound):
        revoke_token("abc123", by=ADMIN, settings=settings)
    with session_scope() as session:
        assert session.scalars(sa.select(ApiToken)).all() == []
    rows = _audit()
    assert [(row.action, row.outcome, row.detail["code"]) for row in rows] == [
        ("api_token.create", "refused", "forbidden"),
        ("api_token.list", "refused", "forbidden"),
        ("api_token.create", "refused", "invalid_input"),
        ("api_token.create", "refused", "invalid_input"),
        ("api_token.revoke", "refused", "invalid_input"),
        ("api_token.revoke", "refused", "api_token_not_found"),
    ]


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer abc", "abc"), ("bearer   abc  ", "abc"), ("BEARER x.y", "x.y")],
)
def test_bearer_header(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize("header", [None, "", "Bearer", "Basic abc", "Token abc", "abc"])
def test_a_header_without_a_bearer_token_is_unauthorized(header: str | None) -> None:
    with pytest.raises(Unauthorized):
        bearer_token(header)


@pytest.mark.parametrize(
    ("text", "lifetime"),
    [
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30m", timedelta(minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("3600", timedelta(hours=1)),
        (" 2D ", timedelta(days=2)),
        ("3650d", timedelta(days=3650)),
    ],
)
def test_a_lifetime_is_a_whole_number_with_a_unit(text: str, lifetime: timedelta) -> None:
    assert parse_expires_in(text) == lifetime


@pytest.mark.parametrize(
    "text", ["", "0", "0d", "-5", "5x", "1.5d", "abc", "d", "3651d", "99999999999d", "1 d"]
)
def test_a_nonsense_lifetime_is_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput, match="lifetime"):
        parse_expires_in(text)


def test_a_token_expires(db_url: str) -> None:
    settings = get_settings()
    lasting = create_token(
        role="viewer", actor_name="grafana", by=ADMIN, settings=settings, expires_in="90d"
    )
    assert lasting.expires_at == lasting.created_at + timedelta(days=90)
    assert authenticate(lasting.token, settings).id == "api:grafana"
    short = create_token(
        role="operator",
        actor_name="job",
        by=ADMIN,
        settings=settings,
        expires_in=timedelta(seconds=1),
    )
    assert short.expires_at is not None
    listed = {info.id: info.expires_at for info in list_tokens(by=ADMIN, settings=settings)}
    assert listed == {lasting.id: lasting.expires_at, short.id: short.expires_at}
    time.sleep(max(0.0, (short.expires_at - utcnow()).total_seconds()) + 0.1)
    with pytest.raises(Unauthorized, match="expired"):
        authenticate(short.token, settings)
    created = [row for row in _audit() if row.action == "api_token.create"]
    assert [row.detail.get("expires_at") for row in created] == [
        lasting.expires_at.isoformat(),
        short.expires_at.isoformat(),
    ]


def test_a_nonsense_lifetime_creates_nothing_and_is_audited(db_url: str) -> None:
    with pytest.raises(InvalidInput):
        create_token(
            role="viewer", actor_name="x", by=ADMIN, settings=get_settings(), expires_in="soon"
        )
    with session_scope() as session:
        assert session.scalars(sa.select(ApiToken)).all() == []
    assert [(row.action, row.outcome, row.detail["code"]) for row in _audit()] == [
        ("api_token.create", "refused", "invalid_input")
    ]
