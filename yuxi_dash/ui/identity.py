"""Who is looking at the dashboard: local, OIDC (st.login) or trusted-proxy identity.

`resolve_identity` is the pure decision (settings + what the request carries ->
an Actor or a one-line refusal); `current_identity` feeds it from Streamlit
(`st.user`, `st.context.headers`, the bound address); `require_actor` is what
app.py and every page call first: it draws the refusal page and stops the run
when nobody acceptable is asking, so a refused visitor sees nothing else.

Modes (settings.auth_mode):
- local: the one operator named in settings (`local_operator`); role from the
  allowlists, or ADMIN when no list names them. The server binds 127.0.0.1.
- oidc: `st.login()` / `st.user` (needs `[auth]` in .streamlit/secrets.toml);
  the signed-in email must be on an allowlist.
- proxy: the email in `proxy_user_header`, believed only when the request also
  carries `proxy_secret_header` equal to `proxy_secret`, or when the server is
  bound to loopback (so only a proxy on the same host can reach it).
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yuxi_dash.auth import Actor, Role, role_for_email
from yuxi_dash.settings import Settings, get_settings


@dataclass(frozen=True)
class Identity:
    """The outcome of identifying a request: an actor, or why there is none."""

    actor: Actor | None
    refusal: str | None = None
    needs_login: bool = False
    banner: str | None = None


def is_loopback(address: str | None) -> bool:
    """True when `address` (a bind address or host name) only accepts local connections."""
    if not address:
        return False  # unset means every interface
    host = address.strip().strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _lower_keys(headers: Mapping[str, str]) -> dict[str, str]:
    return {str(key).lower(): str(value) for key, value in headers.items()}


def _email_from_header(value: str) -> str:
    """Accept `someone@example.com` or `Some One <someone@example.com>`."""
    value = value.strip()
    if "<" in value and value.endswith(">"):
        value = value[value.rindex("<") + 1 : -1]
    return value.strip().lower()


def _local_identity(settings: Settings) -> Identity:
    email = settings.local_operator.strip().lower()
    role = role_for_email(email, settings) or Role.ADMIN
    return Identity(
        actor=Actor(id=email, role=role, email=email, via="local"),
        banner=(
            f"Local mode: you are {email} ({role.label}). Anyone who can reach this "
            "machine's 127.0.0.1 acts as this operator; use oidc or proxy mode for a team."
        ),
    )


def _oidc_identity(
    settings: Settings, user_info: Mapping[str, Any], auth_configured: bool
) -> Identity:
    if not auth_configured:
        return Identity(
            actor=None,
            refusal=(
                "OIDC mode needs an [auth] section in .streamlit/secrets.toml "
                "(see .streamlit/secrets.toml.example)."
            ),
        )
    if not user_info.get("is_logged_in"):
        return Identity(actor=None, refusal="Sign in to use yuxi-dash.", needs_login=True)
    email = str(user_info.get("email") or "").strip().lower()
    role = role_for_email(email, settings)
    if role is None:
        return Identity(
            actor=None, refusal=f"{email or 'This account'} is not allowed to use yuxi-dash."
        )
    return Identity(actor=Actor(id=email, role=role, email=email, via="oidc"))


def _proxy_identity(
    settings: Settings, headers: Mapping[str, str], server_address: str | None
) -> Identity:
    lowered = _lower_keys(headers)
    presented = lowered.get(settings.proxy_secret_header.lower())
    if settings.proxy_secret:
        trusted = presented is not None and hmac.compare_digest(
            presented.encode(), settings.proxy_secret.encode()
        )
    else:
        trusted = False
    if not trusted and not is_loopback(server_address):
        return Identity(
            actor=None,
            refusal=(
                "Proxy mode: this request did not come through the trusted proxy "
                "(shared-secret header missing or wrong, and the server is not bound to loopback)."
            ),
        )
    email = _email_from_header(lowered.get(settings.proxy_user_header.lower(), ""))
    if not email:
        return Identity(actor=None, refusal="Proxy mode: the proxy did not say who you are.")
    role = role_for_email(email, settings)
    if role is None:
        return Identity(actor=None, refusal=f"{email} is not allowed to use yuxi-dash.")
    return Identity(actor=Actor(id=email, role=role, email=email, via="proxy"))


def resolve_identity(
    settings: Settings,
    *,
    user_info: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    server_address: str | None = None,
    auth_configured: bool = False,
) -> Identity:
    """Decide who is asking from what the request carries; never raises."""
    if settings.auth_mode == "local":
        return _local_identity(settings)
    if settings.auth_mode == "oidc":
        return _oidc_identity(settings, user_info or {}, auth_configured)
    return _proxy_identity(settings, headers or {}, server_address)


# --- Streamlit glue -----------------------------------------------------------


def current_identity(settings: Settings | None = None) -> Identity:
    """Identify the current Streamlit session's request."""
    import streamlit as st
    from streamlit.auth_util import get_secrets_auth_section

    settings = settings or get_settings()
    user_info: Mapping[str, Any] = {}
    headers: Mapping[str, str] = {}
    auth_configured = False
    if settings.auth_mode == "oidc":
        auth_configured = bool(get_secrets_auth_section())
        user_info = st.user.to_dict()
    elif settings.auth_mode == "proxy":
        headers = dict(st.context.headers or {})
    return resolve_identity(
        settings,
        user_info=user_info,
        headers=headers,
        server_address=st.get_option("server.address"),
        auth_configured=auth_configured,
    )


def show_refusal(identity: Identity) -> None:
    """The refusal page: one line, a sign-in button when that would help, nothing else."""
    import streamlit as st

    st.title("yuxi-dash")
    st.error(identity.refusal or "You are not allowed to use yuxi-dash.")
    if identity.needs_login:
        st.button("Sign in", type="primary", on_click=st.login)


def _hand_navigation_to_app() -> None:
    """Run app.py instead when Streamlit ran this page as an old-style `pages/` file.

    Streamlit decides per process (and AppTest per run) that an app with a
    `pages/` directory is file-based until `st.navigation` is first called; a
    first request for /threads then runs pages/threads.py alone, and app.py
    (identity, navigation, error guard) never runs. app.py always calls
    `st.navigation`, so settle that, run app.py in this same run (it picks
    this page by its URL and runs it through the guard), and stop here. The
    same run keeps the widget events that triggered it; a rerun would drop them.
    """
    import runpy

    import streamlit as st
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    # A Streamlit without this class attribute has no such per-process mode: nothing to settle.
    if not getattr(PagesManager, "uses_pages_directory", False) or ctx is None:
        return
    PagesManager.uses_pages_directory = False
    runpy.run_path(str(ctx.pages_manager.main_script_path), run_name="__main__")
    st.stop()


def require_actor(min_role: Role = Role.VIEWER, *, action: str = "open this page") -> Actor:
    """The acting operator, or draw the refusal and stop this run.

    Every page calls this first, so it also hands navigation to app.py when a
    page was run on its own (see `_hand_navigation_to_app`).
    """
    import streamlit as st

    _hand_navigation_to_app()
    identity = current_identity()
    if identity.actor is None:
        show_refusal(identity)
        st.stop()
    actor = identity.actor
    if actor.role < min_role:
        st.error(f"You need the {min_role.label} role to {action}; you are {actor.role.label}.")
        st.stop()
    return actor
