"""CLI: memory as of a moment and between two moments.

- `memory facts|entities|stats USER --as-of ISO`: what the memory held then (view
  `as_of`); `--entity UUID` with `facts` gives one entity's facts then. Each fact says
  whether it was valid in the world then; a fact our corrections changed later is shown as
  it was, with the corrections that changed it.
- `memory diff USER --from ISO --to ISO [--limit N]`: facts added, retired, changed, and
  come and gone between the two moments, each with who or what did it (view `diff`; the
  Facts page's "Diff with").
A moment is an ISO date or date and time; no offset means UTC; a date alone is 00:00 UTC.
Gated and audited like every memory command (exit 6 when gated off, no graph query); a bad
moment is exit 2, audited. `--json` prints the service's dict as it is. Registered by
`cli.memory.views.register`.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import CommandResult, add_user_command, command_actor
from yuxi_dash.cli.output import render_table
from yuxi_dash.wording import plain, stamp

MOMENT_HELP = "an ISO date or date and time (UTC unless an offset is given)"
FACT_COLUMNS = [
    "uuid",
    "source",
    "name",
    "target",
    "valid_then",
    "status_then",
    "status_now",
    "created_at",
    "retired_at",
]


def add_as_of(parser: argparse.ArgumentParser) -> None:
    """`--as-of ISO` on an existing view command."""
    parser.add_argument(
        "--as-of", dest="as_of", metavar="ISO", default=None, help=f"as of a moment: {MOMENT_HELP}"
    )


def _access(args: argparse.Namespace, view: str) -> Any:
    from yuxi_dash.memory.views.gate import VIEW_ACTION, open_view

    actor = command_actor(args, action=VIEW_ACTION, target=f"memory:{args.user}", default="cli")
    return open_view(args.user, view, actor=actor)


def _cell(key: str, value: Any) -> Any:
    if key.endswith("_at") and value not in (None, ""):
        return stamp(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return "-" if value in (None, "") else value


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    return render_table([[_cell(c, row.get(c)) for c in columns] for row in rows], columns)


def _corrected_note(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        for later in row.get("later") or []:
            lines.append(
                f"{row['uuid']}: later {later['action']} by {later['actor']} at "
                f"{stamp(later['at'])} (audit row {later['audit_id']})"
            )
    return ("\n" + "\n".join(lines)) if lines else ""


def facts_as_of(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.history import as_of

    access = _access(args, "as_of")
    if args.entity:
        data = as_of.entity_facts_as_of(
            access, args.as_of, args.entity, limit=args.limit, offset=args.offset
        )
        head = f"as of {stamp(data['as_of'])}: {data['total']:,} fact(s) of this entity held"
    else:
        data = as_of.facts_as_of(access, args.as_of, limit=args.limit, offset=args.offset)
        head = (
            f"as of {stamp(data['as_of'])}: {data['total']:,} fact(s) held, "
            f"{data['valid_then']:,} valid in the world then; "
            f"{data['retired_by_then']:,} retired by then"
        )
        if data["deleted_since"]:
            head += f"; {len(data['deleted_since'])} of them deleted since (see --json)"
    text = f"{head}\n{_table(data['facts'], FACT_COLUMNS)}{_corrected_note(data['facts'])}"
    return CommandResult(data, text)


def entities_as_of(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.history import as_of

    data = as_of.entities_as_of(
        _access(args, "as_of"), args.as_of, search=args.search, limit=args.limit, offset=args.offset
    )
    text = (
        f"as of {stamp(data['as_of'])}: {data['total']:,} entities written "
        "(names and summaries are today's)\n"
        + _table(data["entities"], ["uuid", "name", "labels", "created_at"])
    )
    return CommandResult(data, text)


def stats_as_of(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.history import as_of

    data = as_of.stats_as_of(_access(args, "as_of"), args.as_of)
    keys = [
        "as_of",
        "entities",
        "episodes",
        "held_facts",
        "valid_facts",
        "retired_facts",
        "corrections_by_then",
        "corrections_after",
    ]
    text = "\n".join(f"{k}: {plain(_cell(k, data[k]), missing='-')}" for k in keys)
    return CommandResult(data, text)


def _diff(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.history.diff import CHANGES, memory_diff, who

    data = memory_diff(_access(args, "diff"), args.start, args.end, limit=args.limit)
    counts = data["counts"]
    lines = [
        f"{data['user_id']} from {stamp(data['from'])} to {stamp(data['to'])}: "
        + ", ".join(f"{counts[c]:,} {c.replace('_', ' ')}" for c in CHANGES)
    ]
    for change in CHANGES:
        rows = [{**row, "by": who(row.get("by"))} for row in data[change]]
        if not rows:
            continue
        shown = f" (first {len(rows)})" if counts[change] > len(rows) else ""
        lines.append(f"\n{change.replace('_', ' ')}{shown}:")
        lines.append(_table(rows, ["uuid", "source", "name", "target", "fact", "by"]))
    if data["corrections_between"]:
        lines.append(f"\nour corrections in between: {len(data['corrections_between'])}")
    return CommandResult(data, "\n".join(lines))


def register(memory_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `diff` under `yuxi-dash memory`."""
    from yuxi_dash.cli.threads import positive_int

    diff = add_user_command(
        memory_sub, "diff", _diff, "facts added, retired and changed between two moments, and who"
    )
    diff.add_argument("--from", dest="start", required=True, metavar="ISO", help=MOMENT_HELP)
    diff.add_argument("--to", dest="end", required=True, metavar="ISO", help=MOMENT_HELP)
    diff.add_argument("--limit", type=positive_int, default=200, help="rows per list (max 500)")
