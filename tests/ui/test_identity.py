"""Identity resolution for local, OIDC and trusted-proxy modes (yuxi_dash.access.roles)."""

from __future__ import annotations

import pytest

from yuxi_dash.access.roles import Role, is_loopback, resolve_identity
from yuxi_dash.settings import Settings


def _settings(**overrides: object) -> Settings:
    return Settings(**overrides)


LOCAL = {"server_address": "127.0.0.1", "peer_address": "127.0.0.1"}  # a visit on this machine


def test_local_mode_is_the_named_operator_as_admin_with_a_banner() -> None:
    identity = resolve_identity(_settings(local_operator="Ops@Example.com"), **LOCAL)
    assert identity.actor is not None
    assert identity.actor.id == "ops@example.com"
    assert identity.actor.role is Role.ADMIN
    assert identity.actor.via == "local"
    assert identity.banner and "Local mode" in identity.banner


def test_local_mode_takes_the_role_from_the_allowlists_when_listed() -> None:
    settings = _settings(local_operator="ops@example.com", viewer_emails="ops@example.com")
    identity = resolve_identity(settings, **LOCAL)
    assert identity.actor is not None and identity.actor.role is Role.VIEWER


def test_oidc_without_auth_secrets_refuses_with_the_fix() -> None:
    identity = resolve_identity(_settings(auth_mode="oidc"), user_info={"is_logged_in": True})
    assert identity.actor is None
    assert "[auth]" in (identity.refusal or "")


def test_oidc_not_signed_in_asks_for_login() -> None:
    identity = resolve_identity(
        _settings(auth_mode="oidc"), user_info={"is_logged_in": False}, auth_configured=True
    )
    assert identity.actor is None and identity.needs_login


def test_oidc_signed_in_on_no_list_is_refused_and_listed_domain_gets_its_role() -> None:
    settings = _settings(auth_mode="oidc", operator_domains="example.com")
    outsider = resolve_identity(
        settings, user_info={"is_logged_in": True, "email": "x@other.org"}, auth_configured=True
    )
    assert outsider.actor is None and not outsider.needs_login
    insider = resolve_identity(
        settings, user_info={"is_logged_in": True, "email": "Kim@Example.com"}, auth_configured=True
    )
    assert insider.actor is not None
    assert (insider.actor.id, insider.actor.role, insider.actor.via) == (
        "kim@example.com",
        Role.OPERATOR,
        "oidc",
    )


def _proxy(**overrides: object) -> Settings:
    return _settings(auth_mode="proxy", admin_emails="boss@example.com", **overrides)


def test_proxy_header_needs_the_shared_secret_when_not_on_loopback() -> None:
    settings = _proxy(proxy_secret="s3cret")
    forged = resolve_identity(
        settings, headers={"X-Forwarded-Email": "boss@example.com"}, server_address="0.0.0.0"
    )
    assert forged.actor is None
    wrong = resolve_identity(
        settings,
        headers={"X-Forwarded-Email": "boss@example.com", "X-Yuxi-Proxy-Secret": "guess"},
        server_address="0.0.0.0",
    )
    assert wrong.actor is None
    good = resolve_identity(
        settings,
        headers={"x-forwarded-email": "Boss <boss@example.com>", "x-yuxi-proxy-secret": "s3cret"},
        server_address="0.0.0.0",
    )
    assert good.actor is not None and good.actor.role is Role.ADMIN and good.actor.via == "proxy"


def test_proxy_without_a_secret_is_trusted_only_on_loopback_with_a_warning() -> None:
    headers = {"X-Forwarded-Email": "boss@example.com"}
    assert resolve_identity(_proxy(), headers=headers, server_address=None).actor is None
    on_loopback = resolve_identity(_proxy(), headers=headers, server_address="127.0.0.1")
    assert on_loopback.actor is not None and on_loopback.actor.id == "boss@example.com"
    assert on_loopback.banner and "YUXI_DASH_PROXY_SECRET" in on_loopback.banner


def test_proxy_missing_or_unlisted_user_is_refused() -> None:
    assert resolve_identity(_proxy(), headers={}, server_address="127.0.0.1").actor is None
    unlisted = resolve_identity(
        _proxy(), headers={"X-Forwarded-Email": "who@else.org"}, server_address="::1"
    )
    assert unlisted.actor is None and "not allowed" in (unlisted.refusal or "")


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("127.8.0.1", True),
        ("0.0.0.0", False),
        ("", False),
        (None, False),
        ("10.0.0.5", False),
        ("example.com", False),
    ],
)
def test_is_loopback(address: str | None, expected: bool) -> None:
    assert is_loopback(address) is expected
