"""Who is asking and what they may do: identities, roles from allowlists, the role check.

The service layer calls the role check on every write (and memory views), so a hidden button
is never the only guard. This module maps an email to a role, builds the CLI's actor
(`cli_actor`: its role is `YUXI_DASH_CLI_ROLE`) and decides who a dashboard request is
(`resolve_identity`). It never imports Streamlit: `yuxi_dash.ui.identity` hands it what a
request carries. Dashboard modes (settings.auth_mode):
- local: `local_operator`, role from the allowlists or ADMIN. Nobody is signed in unless
  Streamlit's bound address (the last ``--server.address``, config or environment) is
  loopback AND the peer is loopback.
- oidc: `st.user`; the email must be on an allowlist and not marked unverified.
- proxy: the email in `proxy_user_header`, believed only with `proxy_secret_header` equal to
  `proxy_secret` when one is set, else only on a loopback bind (with a warning banner).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from yuxi_dash.errors import Forbidden, InvalidInput
from yuxi_dash.settings import Settings, get_settings


class Role(IntEnum):
    """Ordered roles: each includes the rights of the ones below it."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Actor:
    """A resolved identity: `id` is what the audit log records."""

    id: str
    role: Role
    email: str | None = None
    via: str = "local"  # local | oidc | proxy | cli | api


def role_for_email(email: str | None, settings: Settings) -> Role | None:
    """The highest role the allowlists grant this email, or None when it is on no list."""
    if not email:
        return None
    email = email.strip().lower()
    domain = email.rpartition("@")[2] if "@" in email else ""
    grants = (
        (Role.ADMIN, settings.admin_emails, settings.admin_domains),
        (Role.OPERATOR, settings.operator_emails, settings.operator_domains),
        (Role.VIEWER, settings.viewer_emails, settings.viewer_domains),
    )
    for role, emails, domains in grants:
        if email in emails or (domain and domain in domains):
            return role
    return None


MAX_ACTOR_LENGTH = 256  # the audit log's actor column


def clean_actor_id(value: str) -> str:
    """`value` stripped, as the audit log will record it; InvalidInput when it names nobody.

    Refused: empty or whitespace only, longer than the audit column, or holding
    a control character (a NUL byte, a newline) that would forge or break a row.
    """
    actor_id = value.strip()
    if not actor_id:
        raise InvalidInput("the actor must name someone; it is empty")
    if len(actor_id) > MAX_ACTOR_LENGTH:
        raise InvalidInput(f"the actor is longer than {MAX_ACTOR_LENGTH} characters")
    if any(unicodedata.category(char) in {"Cc", "Cf", "Zl", "Zp"} for char in actor_id):
        raise InvalidInput("the actor holds a control character")
    return actor_id


def cli_actor(
    actor_id: str | None = None,
    *,
    settings: Settings | None = None,
    default: str | None = None,
) -> Actor:
    """Who runs a CLI command, and with which role.

    The actor is `actor_id` (from `--actor`), else `YUXI_DASH_CLI_ACTOR`, else
    `default`; InvalidInput (exit 2) when none is given or it is empty. The role
    is `YUXI_DASH_CLI_ROLE` (viewer, operator or admin; default operator), never
    more: an admin-only command needs YUXI_DASH_CLI_ROLE=admin.
    """
    settings = settings or get_settings()
    chosen = actor_id if actor_id is not None else (settings.cli_actor or default)
    if chosen is None:
        raise InvalidInput("say who is acting: pass --actor NAME or set YUXI_DASH_CLI_ACTOR")
    return Actor(id=clean_actor_id(chosen), role=Role[settings.cli_role.upper()], via="cli")


def require_role(actor: Actor, needed: Role, *, action: str) -> None:
    """Raise Forbidden unless `actor` holds at least `needed`."""
    if actor.role < needed:
        raise Forbidden(f"{action} needs the {needed.label} role; {actor.id} is {actor.role.label}")


# --- dashboard identity: what a request carries -> an Actor or a refusal ----------

HeaderSource = Mapping[str, str] | Iterable[tuple[str, str]]

# RFC 5322 dot-atom local part @ host name; nothing Markdown or HTML could act on.
_EMAIL = re.compile(
    r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
    r"@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
_MAX_EMAIL_LENGTH = 254


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


def _header_values(headers: HeaderSource) -> dict[str, list[str]]:
    """Every value of every header, keys lower-cased (a header may be repeated)."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    values: dict[str, list[str]] = {}
    for key, value in pairs:
        values.setdefault(str(key).lower(), []).append(str(value))
    return values


def _email_from_header(value: str) -> str:
    """Accept `someone@example.com` or `Some One <someone@example.com>`."""
    value = value.strip()
    if "<" in value and value.endswith(">"):
        value = value[value.rindex("<") + 1 : -1]
    return value.strip().lower()


def _valid_email(email: str) -> bool:
    return len(email) <= _MAX_EMAIL_LENGTH and _EMAIL.fullmatch(email) is not None


def _refused(reason: str, *, needs_login: bool = False) -> Identity:
    return Identity(actor=None, refusal=reason, needs_login=needs_login)


def _listed(email: str, settings: Settings, via: str) -> Identity:
    """The actor for a claimed email: valid, on an allowlist, else a refusal."""
    if not _valid_email(email):
        return _refused("The account's email address is missing or malformed.")
    role = role_for_email(email, settings)
    if role is None:
        return _refused(f"{email} is not allowed to use yuxi-dash.")
    return Identity(actor=Actor(id=email, role=role, email=email, via=via))


def _local_identity(
    settings: Settings, server_address: str | None, peer_address: str | None, served: bool
) -> Identity:
    if served and not is_loopback(server_address):
        return _refused(
            "Local mode signs nobody in: this server listens on "
            f"{server_address or 'every interface'}, not 127.0.0.1. Start it with "
            "yuxi-dash serve (it binds 127.0.0.1), or set YUXI_DASH_AUTH_MODE to oidc "
            "or proxy to serve a network."
        )
    if served and not is_loopback(peer_address):
        return _refused(
            "Local mode signs in only visitors on this machine; this connection "
            "does not come from 127.0.0.1."
        )
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
        return _refused(
            "OIDC mode needs an [auth] section in .streamlit/secrets.toml "
            "(see .streamlit/secrets.toml.example)."
        )
    if not user_info.get("is_logged_in"):
        return _refused("Sign in to use yuxi-dash.", needs_login=True)
    if user_info.get("email_verified") is False:
        return _refused("Your provider says this account's email address is not verified.")
    email = str(user_info.get("email") or "").strip().lower()
    return _listed(email, settings, "oidc")


def _proxy_identity(
    settings: Settings, headers: HeaderSource, server_address: str | None
) -> Identity:
    values = _header_values(headers)
    banner = None
    if settings.proxy_secret:
        presented = values.get(settings.proxy_secret_header.lower(), [])
        trusted = len(presented) == 1 and hmac.compare_digest(
            presented[0].encode(), settings.proxy_secret.encode()
        )
        if not trusted:
            return _refused(
                "Proxy mode: this request did not come through the trusted proxy "
                "(its shared-secret header is missing or wrong)."
            )
    elif is_loopback(server_address):
        banner = (
            "Proxy mode without YUXI_DASH_PROXY_SECRET: the user header is believed "
            "because the server is bound to loopback, so any process on this host "
            "can claim any identity. Set YUXI_DASH_PROXY_SECRET and have the proxy send it."
        )
    else:
        return _refused(
            "Proxy mode: this request did not come through the trusted proxy (no "
            "YUXI_DASH_PROXY_SECRET is set and the server is not bound to loopback)."
        )
    claimed = values.get(settings.proxy_user_header.lower(), [])
    if len(claimed) > 1:
        return _refused("Proxy mode: the request names more than one user.")
    email = _email_from_header(claimed[0]) if claimed else ""
    if not email:
        return _refused("Proxy mode: the proxy did not say who you are.")
    identity = _listed(email, settings, "proxy")
    return Identity(actor=identity.actor, refusal=identity.refusal, banner=banner)


def resolve_identity(
    settings: Settings,
    *,
    user_info: Mapping[str, Any] | None = None,
    headers: HeaderSource | None = None,
    server_address: str | None = None,
    peer_address: str | None = None,
    served: bool = True,
    auth_configured: bool = False,
) -> Identity:
    """Decide who is asking from what the request carries; never raises.

    `server_address` is the address Streamlit bound (None: every interface),
    `peer_address` the TCP peer of this session (None: unknown, treated as
    remote), and `served` False only when no server carries the script (the
    script runs in this process, as under AppTest, so nothing can connect).
    """
    if settings.auth_mode == "local":
        return _local_identity(settings, server_address, peer_address, served)
    if settings.auth_mode == "oidc":
        return _oidc_identity(settings, user_info or {}, auth_configured)
    return _proxy_identity(settings, headers or {}, server_address)
