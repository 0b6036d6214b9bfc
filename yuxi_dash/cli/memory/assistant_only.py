"""CLI commands of assistant-only facts (`memory.quality.assistant_only`).

- `memory assistant-only USER [--before ISO] [--limit N]`: the user's assistant-only facts,
  oldest first, with the share (gated and audited as the `assistant_only` view); `--all`
  instead of USER lists every user graph by share (operator; gated-off users skipped).
- `memory retract-assistant-only USER --before ISO --preview`: what the bulk retract would
  change (the facts, their count) and the preview token; then
  `memory retract-assistant-only USER --before ISO --reason TEXT --token TOKEN [--ticket REF]`
  retracts exactly that set (operator; `preview_stale` exit 4 if it changed). It prints the
  parent audit row id, which `memory undo AUDIT_ID` takes to undo the whole bulk in one step.
`memory stats --json` carries the share (`assistant_only_share` and its counts); when it
cannot be read, `assistant_only_share` is null and `assistant_only_error` names the code.
Registered by `cli.memory.views.register`.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.arguments import positive_int
from yuxi_dash.cli.common import (
    CommandResult,
    add_actor_and_json_flags,
    command_actor,
)
from yuxi_dash.cli.output import render_table
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.memory.quality.assistant_only_actions import (
    BULK_ACTION,
    PREVIEW_ACTION,
    SCAN_ACTION,
    VIEW,
)
from yuxi_dash.wording import plain, stamp

# The memory modules load graphiti-core: imported by the handlers that need them.
COLUMNS = ["uuid", "source", "name", "target", "source_kind", "episode_speakers", "created_at"]


def share_text(value: float | None) -> str:
    from yuxi_dash.memory.quality.assistant_only import share_text as text

    return text(value, missing="-")


def _table(facts: list[dict[str, Any]]) -> str:
    if not facts:
        return "(none)"
    cells = [
        [
            stamp(f[c]) if c == "created_at" and f.get(c) else plain(f.get(c), missing="-")
            for c in COLUMNS
        ]
        for f in facts
    ]
    return render_table(cells, COLUMNS)


def _list(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.quality import assistant_only as ao
    from yuxi_dash.memory.views.gate import VIEW_ACTION, open_view

    if args.all or args.user is None:
        actor = command_actor(args, action=SCAN_ACTION, target="memory:*", default="cli")
        fleet = ao.assistant_only_fleet(actor=actor, limit=args.limit)
        shown = [
            {**r, "share": share_text(r.get("assistant_only_share"))}
            for r in fleet["users"]
            if not r["gated_off"]
        ]
        columns = ["user_id", "share", "assistant_only_facts", "live_facts", "error"]
        cells = [[plain(r.get(c), missing="-") for c in columns] for r in shown]
        text = render_table(cells, columns) if cells else "no user graph could be read"
        if fleet["truncated"]:
            text += f"\nthe first {len(fleet['users'])} of {fleet['total']} user graphs: --limit"
        return CommandResult(fleet, text)
    target = f"memory:{args.user}"
    actor = command_actor(args, action=VIEW_ACTION, target=target, default="cli")
    access = open_view(args.user, VIEW, actor=actor)
    data = ao.assistant_only_facts(access, before=args.before or "", limit=args.limit)
    head = (
        f"{data['assistant_only_facts']:,} of {data['live_facts']:,} live facts "
        f"are assistant-only ({share_text(data['assistant_only_share'])})"
    )
    if data["before"]:
        head += f"; {data['total']:,} created before {stamp(data['before'])}"
    return CommandResult(data, head + "\n" + _table(data["facts"]))


def _retract(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.support import bulk_retract

    target = f"memory:{args.user}"
    if args.preview:
        actor = command_actor(args, action=PREVIEW_ACTION, target=target, default="cli")
        data = bulk_retract.preview_bulk_retract(args.user, args.before, actor=actor)
        text = (
            f"would retract {data['count']:,} assistant-only fact(s) of {args.user} created "
            f"before {stamp(data['before'])}:\n{_table(data['facts'])}\n"
            f"to retract them: --reason TEXT --token {data['preview_token']}"
        )
        if data["too_large"]:
            text += f"\n(more than {data['max_bulk']} at once is refused: an earlier --before)"
        return CommandResult(data, text)
    actor = command_actor(args, action=BULK_ACTION, target=target, default="cli")
    data = bulk_retract.bulk_retract(
        args.user,
        args.before,
        actor=actor,
        reason=args.reason or "",
        token=args.token or "",
        ticket=args.ticket,
    )
    text = (
        f"retracted {data['count']:,} assistant-only fact(s) of {args.user}; audit row "
        f"{data['audit_id']} (`yuxi-dash memory undo {data['audit_id']}` undoes them all)"
    )
    return CommandResult(data, text)


def register(memory_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `assistant-only` and `retract-assistant-only` under `yuxi-dash memory`."""
    listing = memory_sub.add_parser(
        "assistant-only",
        help="facts whose only provenance is assistant or tool text, and their share",
    )
    listing.add_argument("user", metavar="USER", nargs="?", default=None, help="omit for --all")
    listing.add_argument("--all", action="store_true", help="every user graph by share")
    listing.add_argument("--before", default="", help="only facts created before (ISO 8601)")
    listing.add_argument("--limit", type=positive_int, default=200)
    add_actor_and_json_flags(listing)
    listing.set_defaults(handler=_list)

    retract = memory_sub.add_parser(
        "retract-assistant-only",
        help="retract a user's assistant-only facts created before a moment "
        "(--preview first; operator, audited, undone in one step by `memory undo`)",
    )
    retract.add_argument("user", metavar="USER")
    retract.add_argument("--before", required=True, help="ISO 8601, e.g. 2026-11-01T00:00:00Z")
    retract.add_argument("--preview", action="store_true", help="show the set and its token")
    retract.add_argument("--reason", default=None, help="why (at least 3 words, 15 chars)")
    retract.add_argument("--token", default=None, help="the token --preview printed")
    retract.add_argument("--ticket", default=None, help="a ticket reference, e.g. SUP-1234")
    add_actor_and_json_flags(retract)
    retract.set_defaults(handler=_retract)


def stats_share(access: Any) -> dict[str, Any]:
    """The keys `memory stats` adds: the assistant-only share and the counts behind it; when
    they cannot be read, a null share and the error's code (the other counts still print).
    The share's own live-fact count is `assistant_only_by_basis`' sum (`live_facts` is the
    stats' own)."""
    from yuxi_dash.memory.quality.assistant_only import assistant_only_share

    try:
        data = assistant_only_share(access)
    except YuxiDashError as exc:
        return {"assistant_only_share": None, "assistant_only_error": exc.code}
    data.pop("live_facts", None)
    return data
