"""`resolve_identity`'s decisions on hostile requests (`yuxi_dash.access.roles`, no Streamlit)."""

from __future__ import annotations

import pytest

from yuxi_dash.access.roles import Role, resolve_identity
from yuxi_dash.settings import Settings

ADMIN = "boss@example.com"
SECRET = "s3cret"


def _proxy(**overrides: object) -> Settings:
    return Settings(
        auth_mode="proxy", admin_emails=ADMIN, operator_domains="example.com", **overrides
    )


# --- proxy mode with a secret: required always ------------------------------------------


@pytest.mark.parametrize("bound", ["127.0.0.1", "::1", "localhost", "0.0.0.0", None])
@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-Email": ADMIN},
        {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": "guess"},
        {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": ""},
        {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": SECRET + " "},
        {"X-Forwarded-Email": ADMIN, "X-Yuxi-Proxy-Secret": SECRET.upper()},
    ],
)
def test_a_configured_secret_is_required_whatever_the_bind(
    bound: str | None, headers: dict[str, str]
) -> None:
    identity = resolve_identity(_proxy(proxy_secret=SECRET), headers=headers, server_address=bound)
    assert identity.actor is None
    assert "trusted proxy" in (identity.refusal or "")


def test_the_secret_header_twice_is_refused_even_when_one_copy_is_right() -> None:
    pairs = [
        ("X-Forwarded-Email", ADMIN),
        ("X-Yuxi-Proxy-Secret", "guess"),
        ("X-Yuxi-Proxy-Secret", SECRET),
    ]
    identity = resolve_identity(_proxy(proxy_secret=SECRET), headers=pairs, server_address="::1")
    assert identity.actor is None


def test_the_right_secret_signs_in_with_no_warning_banner() -> None:
    identity = resolve_identity(
        _proxy(proxy_secret=SECRET),
        headers={"x-forwarded-email": ADMIN, "X-YUXI-PROXY-SECRET": SECRET},
        server_address="127.0.0.1",
    )
    assert identity.actor is not None and identity.actor.role is Role.ADMIN
    assert identity.banner is None


def test_two_user_headers_are_refused() -> None:
    pairs = [
        ("X-Yuxi-Proxy-Secret", SECRET),
        ("X-Forwarded-Email", "kim@example.com"),
        ("X-Forwarded-Email", ADMIN),
    ]
    identity = resolve_identity(_proxy(proxy_secret=SECRET), headers=pairs, server_address=None)
    assert identity.actor is None and "more than one user" in (identity.refusal or "")


@pytest.mark.parametrize(
    "claimed",
    [
        "![x](https://attacker.example/p.png)@example.com",
        "<img src=x>@example.com",
        "kim@example.com\nX-Other: 1",
        "kim @example.com",
        "kim@exa_mple.com",
        "@example.com",
        "kim@",
        "k" * 250 + "@example.com",
    ],
)
def test_a_malformed_email_is_refused_even_on_a_listed_domain(claimed: str) -> None:
    identity = resolve_identity(
        _proxy(proxy_secret=SECRET),
        headers={"X-Forwarded-Email": claimed, "X-Yuxi-Proxy-Secret": SECRET},
        server_address=None,
    )
    assert identity.actor is None
    assert claimed not in (identity.refusal or "")  # never echoed


# --- proxy mode without a secret -----------------------------------------------------------


def test_no_secret_on_loopback_signs_in_and_the_banner_says_anyone_on_the_host_can() -> None:
    identity = resolve_identity(
        _proxy(), headers={"X-Forwarded-Email": ADMIN}, server_address="127.0.0.1"
    )
    assert identity.actor is not None and identity.actor.id == ADMIN
    assert identity.banner is not None
    assert "without YUXI_DASH_PROXY_SECRET" in identity.banner
    assert "any identity" in identity.banner


@pytest.mark.parametrize("bound", ["0.0.0.0", "::", "10.1.2.3", "", None])
def test_no_secret_off_loopback_is_refused(bound: str | None) -> None:
    identity = resolve_identity(
        _proxy(), headers={"X-Forwarded-Email": ADMIN}, server_address=bound
    )
    assert identity.actor is None and "not bound to loopback" in (identity.refusal or "")


# --- local mode: the bound address and the peer ------------------------------------------


@pytest.mark.parametrize("bound", ["0.0.0.0", "::", "192.0.2.2", "", None])
def test_local_mode_bound_off_loopback_signs_nobody_in(bound: str | None) -> None:
    identity = resolve_identity(Settings(), server_address=bound, peer_address="127.0.0.1")
    assert identity.actor is None
    assert "Local mode signs nobody in" in (identity.refusal or "")


@pytest.mark.parametrize("peer", ["192.0.2.7", "203.0.113.9", "::ffff:192.0.2.7", "", None])
def test_local_mode_refuses_a_peer_that_is_not_loopback(peer: str | None) -> None:
    identity = resolve_identity(Settings(), server_address="127.0.0.1", peer_address=peer)
    assert identity.actor is None
    assert "does not come from 127.0.0.1" in (identity.refusal or "")


@pytest.mark.parametrize(("bound", "peer"), [("127.0.0.1", "127.0.0.1"), ("::1", "::1")])
def test_local_mode_on_loopback_from_loopback_is_the_operator(bound: str, peer: str) -> None:
    identity = resolve_identity(Settings(), server_address=bound, peer_address=peer)
    assert identity.actor is not None and identity.actor.id == "operator@localhost"


def test_local_mode_without_a_server_has_no_peer_to_check() -> None:
    """AppTest runs the script in this process: nothing listens, nothing can connect."""
    identity = resolve_identity(Settings(), server_address=None, peer_address=None, served=False)
    assert identity.actor is not None


def test_the_defaults_fail_closed() -> None:
    """Called with nothing known about the connection, local mode refuses."""
    assert resolve_identity(Settings()).actor is None


# --- oidc ------------------------------------------------------------------------------------


def test_oidc_refuses_an_email_the_provider_marks_unverified() -> None:
    settings = Settings(auth_mode="oidc", admin_emails=ADMIN)
    user = {"is_logged_in": True, "email": ADMIN, "email_verified": False}
    identity = resolve_identity(settings, user_info=user, auth_configured=True)
    assert identity.actor is None and "not verified" in (identity.refusal or "")
    user["email_verified"] = True
    assert resolve_identity(settings, user_info=user, auth_configured=True).actor is not None
