"""Service tokens (yuxi_dash.api.tokens) on SQLite and the real PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from yuxi_dash.access.audit import wait_for_pending_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.api.tokens import (
    authenticate,
    bearer_token,
    create_token,
    hash_token,
    list_tokens,
    revoke_token,
)
from yuxi_dash.errors import ApiTokenNotFound, Forbidden, InvalidInput, Unauthorized
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ApiToken, AuditEntry

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
