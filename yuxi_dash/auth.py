"""Who is asking and what they may do: roles from allowlists, and the role check.

The role check lives here and is called by the service layer on every write
(and by memory views), so hiding a button in a page is never the only guard.
How an identity is obtained (local / OIDC / trusted proxy) is the UI's job
(`yuxi_dash.ui.identity`); this module only maps an email to a role.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from yuxi_dash.errors import Forbidden
from yuxi_dash.settings import Settings


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
    via: str = "local"  # local | oidc | proxy | cli


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


def cli_actor(actor_id: str) -> Actor:
    """Whoever can run the CLI has operator rights (a server-side admin tool, DESIGN §3)."""
    return Actor(id=actor_id, role=Role.ADMIN, via="cli")


def require_role(actor: Actor, needed: Role, *, action: str) -> None:
    """Raise Forbidden unless `actor` holds at least `needed`."""
    if actor.role < needed:
        raise Forbidden(f"{action} needs the {needed.label} role; {actor.id} is {actor.role.label}")
