"""CLI commands of one fact on the Facts page's terms: one fact's provenance, corrections, and undo.

- `memory fact FACT_UUID --user USER`: the fact's provenance (gated and
  audited as the `provenance` view). A fact uuid alone does not name a graph
  (every user has their own), so the user is always given.
- `memory retract|restore|reject FACT_UUID --user USER --reason TEXT [--ticket REF]`
  and `memory supersede FACT_UUID --user USER --reason TEXT --text NEW [--ticket REF]`:
  the operator role (`YUXI_DASH_CLI_ROLE`), the user's `graphiti-memory` gate,
  a reason of 3 words and 15 characters; each prints its audit row id
  (`audit_id` in `--json`), which `memory undo AUDIT_ID` takes: its author
  may undo it; another operator's correction needs `YUXI_DASH_CLI_ROLE=admin`
  and a `--reason` (refused otherwise: `not_your_correction`, exit 1).
- Exit codes as everywhere: 2 bad input, 3 not found, 4 conflict (already
  invalidated, not tentative, already undone, stale), 6 gated off, 1 refused role.
Registered by `cli.memory.views.register`.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import (
    CommandResult,
    add_actor_and_json_flags,
    command_actor,
)
from yuxi_dash.memory.quality.assistant_only_actions import BULK_UNDO_ACTION
from yuxi_dash.wording import plain

# The memory modules load graphiti-core: imported by the handlers that need them, so
# every other `yuxi-dash` command starts without it (as `cli.memory.views` does).
ACTIONS = ("retract", "supersede", "restore", "reject")  # memory.graph.correction_rules.ACTIONS
UNDO_ACTION = "memory.undo"


def _when(value: Any) -> str:
    return plain(value, missing="-")


def provenance_text(data: dict[str, Any]) -> str:
    """The provenance as lines a person reads (strings as they are, no reprs)."""
    fact = data["fact"]
    lines = [
        f"fact {fact['uuid']}: {data['source']['name']} -[{fact['name']}]-> "
        f"{data['target']['name']}",
        f"  text: {fact['fact']}",
        f"  status: {_when(fact['status'])}  source kind: {_when(fact['source_kind'])}  "
        f"hits: {data['hits']}",
        f"  valid_at: {_when(fact['valid_at'])}  invalid_at: {_when(fact['invalid_at'])}  "
        f"expired_at: {_when(fact['expired_at'])}",
    ]
    for episode in data["episodes"]:
        lines.append(f"episode {episode['uuid']} said by {_when(episode.get('said_by'))}")
        message = episode.get("message")
        if message is None:
            lines.append("  no matching chat message")
            continue
        span = message.get("span")
        words = ", ".join(f"{s['word']}@{s['start']}-{s['end']}" for s in message["spans"])
        lines.append(
            f"  thread {message['thread_id']} message #{message['sequence']} "
            f"({message['role']}, {_when(message['created_at'])}): {message['content']}"
        )
        lines.append(
            f"  span {span['start']}-{span['end']}: {words}" if span else "  no key word found"
        )
    by = data.get("invalidated_by")
    if by:
        lines.append(f"invalidated by {by['uuid']} at {_when(by.get('valid_at'))}: {by['fact']}")
    if data.get("same_batch"):
        lines.append(f"retired in the same batch: {len(data['same_batch'])} fact(s)")
        lines += [f"  {f['uuid']}: {f['fact']}" for f in data["same_batch"]]
    return "\n".join(lines)


def _fact(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.views.gate import VIEW_ACTION, audit_target, open_view
    from yuxi_dash.memory.views.provenance import fact_provenance

    actor = command_actor(args, action=VIEW_ACTION, target=audit_target(args.user), default="cli")
    access = open_view(args.user, "provenance", actor=actor)
    data = fact_provenance(access, args.fact)
    return CommandResult(data, provenance_text(data))


def _correct(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.support import corrections
    from yuxi_dash.memory.views.gate import audit_target

    action = args.memory_command
    actor = command_actor(
        args, action=f"memory.{action}", target=audit_target(args.user), default="cli"
    )
    data = corrections.correct(
        action,
        args.user,
        args.fact,
        actor=actor,
        reason=args.reason,
        ticket=args.ticket,
        text=getattr(args, "text", None),
    )
    new = f"; new fact {data['new_fact_uuid']}" if data.get("new_fact_uuid") else ""
    text = f"{action} of {data['fact_uuid']} done{new}; audit row {data['audit_id']}"
    return CommandResult(data, text)


def _undo(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.support import bulk_retract, corrections

    if bulk_retract.is_bulk(args.audit_id):  # a bulk retract's parent row: the whole bulk
        actor = command_actor(args, action=BULK_UNDO_ACTION, target="memory:*", default="cli")
        done = bulk_retract.undo_bulk_retract(args.audit_id, actor=actor, reason=args.reason)
        text = f"undid {done['count']} retract(s) of the bulk; audit row {done['audit_id']}"
        if done["skipped"]:
            text += f" ({done['skipped']} fact(s) were already back as before the bulk)"
        return CommandResult(done, text)
    actor = command_actor(args, action=UNDO_ACTION, target="memory:*", default="cli")
    data = corrections.undo_correction(args.audit_id, actor=actor, reason=args.reason or "")
    text = (
        f"undid the correction of audit row {data['undoes_audit_id']} on {data['fact_uuid']}; "
        f"audit row {data['audit_id']}"
    )
    return CommandResult(data, text)


def _audit_id(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError("an audit row id is a whole number") from None
    if number < 1 or number > 2**63 - 1:
        raise argparse.ArgumentTypeError("an audit row id is a positive 64-bit number")
    return number


def register(memory_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `fact`, the four corrections and `undo` under `yuxi-dash memory`."""

    fact = memory_sub.add_parser(
        "fact", help="one fact's provenance: episodes, chat message, words"
    )
    fact.add_argument("fact", metavar="FACT_UUID")
    fact.add_argument("--user", required=True, help="the user whose graph holds the fact")
    add_actor_and_json_flags(fact)
    fact.set_defaults(handler=_fact)

    helps = {
        "retract": "invalidate a fact (kept, with invalid_at/expired_at); clears its hits",
        "supersede": "replace a fact's text: a new fact, the old one invalidated, both linked",
        "restore": "make a wrongly invalidated fact valid again",
        "reject": "reject a tentative fact; clears its hits",
    }
    for action in ACTIONS:
        parser = memory_sub.add_parser(action, help=helps[action] + " (operator, audited)")
        parser.add_argument("fact", metavar="FACT_UUID")
        parser.add_argument("--user", required=True, help="the user whose graph holds the fact")
        parser.add_argument("--reason", required=True, help="why (at least 3 words, 15 chars)")
        parser.add_argument("--ticket", default=None, help="a ticket reference, e.g. SUP-1234")
        if action == "supersede":
            parser.add_argument("--text", required=True, help="the corrected fact text")
        add_actor_and_json_flags(parser)
        parser.set_defaults(handler=_correct)

    undo = memory_sub.add_parser(
        "undo",
        help="undo a correction by its audit row id (its author; another's: admin, audited)",
    )
    undo.add_argument("audit_id", metavar="AUDIT_ID", type=_audit_id)
    undo.add_argument(
        "--reason",
        default="",
        help="why (optional for your own correction; another operator's needs admin and a reason)",
    )
    add_actor_and_json_flags(undo)
    undo.set_defaults(handler=_undo)
