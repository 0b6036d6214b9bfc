"""Who is looking at the dashboard: the Streamlit side of identity.

`current_identity` reads what the request carries from Streamlit (`st.user`,
`st.context.headers`, the address Streamlit bound, the session's TCP peer) and
hands it to `yuxi_dash.access.roles.resolve_identity`, the pure decision (modes and
rules are described there); `require_actor` is what app.py and every page call
first: it draws the refusal page and stops the run when nobody acceptable is
asking, so a refused visitor sees nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yuxi_dash.access.roles import Actor, Identity, Role, is_loopback, resolve_identity
from yuxi_dash.settings import Settings, get_settings

__all__ = [
    "Identity",
    "current_identity",
    "is_loopback",
    "require_actor",
    "resolve_identity",
    "show_refusal",
]


# --- Streamlit glue -----------------------------------------------------------


def _session_peer() -> tuple[str | None, bool]:
    """(the TCP peer address of this session's websocket, whether a real server carries it).

    Streamlit's `st.context.ip_address` turns a loopback peer into None, the same
    as "unknown", so the raw address is read from the session's client context.
    AppTest installs a stand-in runtime (not a `Runtime`): no socket, no peer.
    """
    from streamlit import runtime
    from streamlit.runtime import Runtime
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    if not runtime.exists() or type(runtime.get_instance()) is not Runtime:
        return None, False
    ctx = get_script_run_ctx()
    client = runtime.get_instance().get_client(ctx.session_id) if ctx is not None else None
    remote = getattr(getattr(client, "client_context", None), "remote_ip", None)
    return (remote if isinstance(remote, str) else None), True


def _request_headers() -> list[tuple[str, str]]:
    """Every header of this session's opening request, repeated ones included."""
    import streamlit as st

    headers = st.context.headers
    if not headers:
        return []
    return [(key, value) for key in headers for value in headers.get_all(key)]


def current_identity(settings: Settings | None = None) -> Identity:
    """Identify the current Streamlit session's request."""
    import streamlit as st
    from streamlit.auth_util import get_secrets_auth_section

    settings = settings or get_settings()
    user_info: Mapping[str, Any] = {}
    headers: list[tuple[str, str]] = []
    auth_configured = False
    if settings.auth_mode == "oidc":
        auth_configured = bool(get_secrets_auth_section())
        user_info = st.user.to_dict()
    elif settings.auth_mode == "proxy":
        headers = _request_headers()
    peer_address, served = _session_peer()
    return resolve_identity(
        settings,
        user_info=user_info,
        headers=headers,
        server_address=st.get_option("server.address"),
        peer_address=peer_address,
        served=served,
        auth_configured=auth_configured,
    )


def show_refusal(identity: Identity) -> None:
    """The refusal page: one line, a sign-in button when that would help, nothing else."""
    import streamlit as st

    from yuxi_dash.ui.page_text import markdown_literal

    st.title("yuxi-dash")
    st.error(markdown_literal(identity.refusal or "You are not allowed to use yuxi-dash."))
    if identity.needs_login:
        st.button("Sign in", type="primary", on_click=st.login)


def require_actor(min_role: Role = Role.VIEWER, *, action: str = "open this page") -> Actor:
    """The acting operator, or draw the refusal and stop this run (every page calls this first)."""
    import streamlit as st

    identity = current_identity()
    if identity.actor is None:
        show_refusal(identity)
        st.stop()
    actor = identity.actor
    if actor.role < min_role:
        st.error(f"You need the {min_role.label} role to {action}; you are {actor.role.label}.")
        st.stop()
    return actor
