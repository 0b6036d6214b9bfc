"""The door to a user's memory: the view gate, its audit row, and the checked graph client.

`open_view` validates the user id (`derive_group_id`), evaluates the
LaunchDarkly gates, and writes an audit row for the attempt — outcome `ok`,
`gated_off`, or `refused` with the error code (a malformed user id, an unknown
view, a missing role: every refusal is on record, the hostile id escaped by the
audit writer). A gated-off user raises `MemoryGatedOff` before any client is
created, so no graph query runs; community views also need
`graphiti-communities-enabled`. Its message (`gate_message`) says how to
configure LaunchDarkly when no source is configured, on the CLI and on the pages
alike. It hands out the `MemoryAccess` every data function needs; `graph_for`
checks a view's own inputs (search text, uuids, pages) with
`yuxi_dash.validation` before any query and audits a refusal there.
`list_memory_users` reads only graph names, never a user's memory; `look_at_every_user`
is the fleet views' one loop (operators; gated-off users listed, never read; a look each).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yuxi_dash import validation
from yuxi_dash.access.audit import audited_refusals, record_audit
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.errors import InvalidInput, MemoryGatedOff, UserNotFound, YuxiDashError
from yuxi_dash.flags import FlagEvaluator, MemoryGates, evaluate_gates
from yuxi_dash.memory.graph.client import GraphClient, get_client
from yuxi_dash.memory.graph.groups import derive_group_id, user_id_from_group
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.wording import reason_text

MAX_SEARCH_CHARS = 500  # entity search and the warm-context query
VIEW_ACTION = "memory.view"
REPAIR_ACTION = "memory.repair_indexes"
VIEWS = frozenset(
    {
        "overview",
        "stats",
        "entities",
        "facts",
        "relations",
        "ratification",
        "communities",
        "episodes",
        "chat",
        "warm_context",
        "index_health",
        "provenance",
        "bundle",
        "assistant_only",  # assistant-only facts (memory.quality.assistant_only)
        "retirements",
        "as_of",  # memory as of a moment (memory.history.as_of)
        "diff",  # what changed between two moments (memory.history.diff)
    }
)
COMMUNITY_VIEWS = frozenset({"communities"})
NOT_CONFIGURED = "not configured"  # a gate's reason when no LaunchDarkly source is configured
# The flag file the demo ships (`yuxi_dash.demo.flags` re-exports it): named by path here,
# since the product never imports the demo.
DEMO_FLAGS_FILE = Path(__file__).resolve().parents[2] / "demo" / "flags.json"


@dataclass(frozen=True)
class MemoryAccess:
    """Proof that the gate was checked and the view audited for this user and actor."""

    user_id: str
    group_id: str
    view: str
    actor: Actor
    gates: MemoryGates
    settings: Settings = field(repr=False)


def group_for(user_id: str) -> str:
    try:
        return derive_group_id(user_id)
    except ValueError as exc:
        raise InvalidInput(f"not a valid user id: {exc}") from exc


def audit_target(user_id: str) -> str:
    """The audit target of a user's memory."""
    return f"memory:{user_id}"


def gates_for(
    user_id: str,
    *,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
) -> MemoryGates:
    """Both gates for a user (no graph query, no audit: flag values are not memory)."""
    group_for(user_id)
    # The LaunchDarkly context is the memory user (key = user id, kind user, role "user").
    return evaluate_gates(
        user_id, settings=settings or get_settings(), evaluator=evaluator, role="user"
    )


def launchdarkly_hint(gates: MemoryGates) -> str | None:
    """How to turn the gates on when no LaunchDarkly source is configured at all, else None.

    With neither LAUNCHDARKLY_SDK_KEY nor YUXI_DASH_LD_FLAGS_FILE every gate is off
    ("not configured"); only `serve --demo` sets the demo's flag file by itself,
    so the reader is told where it is.
    """
    if gates.memory.reason != NOT_CONFIGURED:
        return None
    return (
        "set LAUNCHDARKLY_SDK_KEY or YUXI_DASH_LD_FLAGS_FILE "
        f"(the demo's flag file is {DEMO_FLAGS_FILE})"
    )


def gate_message(gates: MemoryGates, *, communities: bool = False) -> str:
    """Which gate is off for the user and why; how to configure LaunchDarkly when it is not."""
    flag = gates.communities if communities and gates.memory_on else gates.memory
    message = (
        f"memory {'communities are' if flag is gates.communities else 'is'} gated off for "
        f"{gates.user_id}: {flag.key} is off ({reason_text(flag.reason)})"
    )
    hint = launchdarkly_hint(gates)
    return message if hint is None else f"{message}; {hint}"


def open_view(
    user_id: str,
    view: str,
    *,
    actor: Actor,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
) -> MemoryAccess:
    """Gate, then audit, then hand out access; raises MemoryGatedOff when a gate is off."""
    settings = settings or get_settings()
    try:
        if view not in VIEWS:
            raise InvalidInput("unknown memory view")
        require_role(actor, Role.VIEWER, action="view a user's memory")
        group_id = group_for(user_id)
        gates = gates_for(user_id, settings=settings, evaluator=evaluator)
    except YuxiDashError as exc:  # every refusal is on record, before any graph query
        record_audit(
            actor=actor.id,
            action=VIEW_ACTION,
            target=audit_target(user_id),
            outcome="refused",
            detail={"view": view, "via": actor.via, "code": exc.code},
            settings=settings,
        )
        raise
    detail = {"view": view, "via": actor.via, "gate_source": gates.source}
    blocked_by_communities = (
        view in COMMUNITY_VIEWS and gates.memory_on and not gates.communities_on
    )
    if not gates.memory_on or blocked_by_communities:
        flag = gates.communities if blocked_by_communities else gates.memory
        record_audit(
            actor=actor.id,
            action=VIEW_ACTION,
            target=audit_target(user_id),
            outcome="gated_off",
            detail={**detail, "flag": flag.key, "reason": flag.reason},
            settings=settings,
        )
        raise MemoryGatedOff(gate_message(gates, communities=blocked_by_communities))
    record_audit(
        actor=actor.id,
        action=VIEW_ACTION,
        target=audit_target(user_id),
        outcome="ok",
        detail=detail,
        settings=settings,
    )
    return MemoryAccess(user_id, group_id, view, actor, gates, settings)


def view_refusals(access: MemoryAccess) -> AbstractContextManager[None]:
    """Every typed refusal inside is one audit row under the view (`audited_refusals`)."""
    return audited_refusals(
        actor=access.actor.id,
        action=VIEW_ACTION,
        target=audit_target(access.user_id),
        detail={"view": access.view, "via": access.actor.via},
        settings=access.settings,
    )


def graph_for(
    access: MemoryAccess,
    client: GraphClient | None,
    *,
    texts: dict[str, str] | None = None,
    pages: dict[str, int] | None = None,
) -> GraphClient:
    """The client for the user's graph, after the view's own inputs were checked.

    `texts` (name -> value) must be storable text of at most MAX_SEARCH_CHARS,
    `pages` (limit, offset, ...) non-negative 64-bit ints. A refusal here (bad
    input, no graph for this user) is audited under the view.
    """
    with view_refusals(access):
        for name, value in (texts or {}).items():
            validation.text(value, name, limit=MAX_SEARCH_CHARS)
        for name, number in (pages or {}).items():
            validation.non_negative(number, name)
        client = client or get_client(access.settings)
        if not client.graph_exists(access.group_id):
            raise UserNotFound(f"no memory graph for user {access.user_id}")
        return client


# --- user graphs (no user's memory is read: only graph names) --------------
def list_memory_users(
    *, search: str = "", limit: int = 200, client: GraphClient | None = None
) -> tuple[list[str], int]:
    """User ids that have a graph, filtered by a substring, and how many matched."""
    client = client or get_client()
    needle = search.strip().lower()
    users = [u for g in client.list_graphs() if (u := user_id_from_group(g)) is not None]
    matched = [u for u in users if needle in u.lower()] if needle else users
    return matched[:limit], len(matched)


def look_at_every_user(
    view: str,
    read: Callable[[MemoryAccess, GraphClient], dict[str, Any]],
    *,
    actor: Actor,
    action: str,
    purpose: str,
    limit: int,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """One row per user graph (up to `limit`), and how many graphs there are.

    Operators and admins only, checked and audited under `action` (`purpose` names it in
    the refusal). A gated-off user is a row (`gated_off`, `reason`) and is never read; a
    user whose gate closed or graph went since the list was read is left out; each other
    user is one `open_view(user, view)` look, and `read(access, client)` fills its row. A
    read that fails is a row with the error's code, so one slow graph never fails the rest.
    """
    settings = settings or get_settings()
    with audited_refusals(
        actor=actor.id,
        action=action,
        target="memory:*",
        detail={"via": actor.via},
        settings=settings,
    ):
        require_role(actor, Role.OPERATOR, action=purpose)
        validation.non_negative(limit, "limit")
    client = client or get_client(settings)
    users, total = list_memory_users(limit=limit, client=client)
    rows: list[dict[str, Any]] = []
    for user_id in users:
        row: dict[str, Any] = {"user_id": user_id, "gated_off": False, "reason": None}
        gates = gates_for(user_id, settings=settings, evaluator=evaluator)
        if not gates.memory_on:
            rows.append({**row, "gated_off": True, "reason": gates.memory.reason})
            continue
        try:
            access = open_view(user_id, view, actor=actor, settings=settings, evaluator=evaluator)
        except (MemoryGatedOff, UserNotFound):
            continue
        try:
            row.update(read(access, client), error=None)
        except YuxiDashError as exc:
            row["error"] = exc.code
        rows.append(row)
    return rows, total
