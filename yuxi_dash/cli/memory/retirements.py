"""CLI command `memory retirements USER [--suspicious] [--limit N] [--offset N] [--json]`.

Each retired fact of the user's memory beside who retired it: graphiti's pass (the
episode and the facts written with it; `suspicious` when none shares an entity or the
relation name with the retired fact) or our own correction (its audit id). Gated and
audited as the `retirements` view (exit 6 when gated off, no graph query). `--json`
prints `memory.quality.retirements.retirements` as it is. Text from the graph (names,
fact text) is printed with its control characters written out (`escaped_controls`). A
retired fact is put back with `memory restore FACT_UUID --user USER --reason TEXT`; one
our correction retired, with `memory undo AUDIT_ID`. Registered by
`cli.memory.views.register`.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import CommandResult, add_user_command, command_actor
from yuxi_dash.cli.output import render_table
from yuxi_dash.outside_text import escaped_controls
from yuxi_dash.wording import stamp


def _shown(value: Any) -> str:
    """A string from the graph, safe for a terminal."""
    return escaped_controls(str(value if value is not None else "-"))


def _who(row: dict[str, Any]) -> str:
    """Who retired the fact, in a few words."""
    if row["kind"] == "correction":
        found = row["correction"]
        return f"our {found['action']} (audit row {found['audit_id']})"
    if row["kind"] == "own_episode":
        return f"written already ended (episode {_shown(row['episode_uuid'])})"
    if not row["retiring_facts"]:
        return "unmatched"
    episode = f"episode {_shown(row['episode_uuid'])}" if row.get("episode_uuid") else "no episode"
    return f"{episode}: {row['retiring_count']} fact(s)"


def retirements_text(data: dict[str, Any]) -> str:
    """The list as a table, then each suspicious row's retiring facts (controls escaped)."""
    counts = data["counts"]
    head = (
        f"{data['retired']:,} retired fact(s): {counts['suspicious']:,} suspicious, "
        f"{counts['graphiti']:,} by graphiti, {counts['correction']:,} by our corrections, "
        f"{counts['own_episode']:,} written already ended, {counts['unmatched']:,} unmatched"
    )
    rows = data["rows"]
    if not rows:
        empty = "no suspicious retirements" if data["suspicious_only"] else "no retired facts"
        return f"{head}\n{empty}"
    shown = f"showing {data['offset'] + 1:,}-{data['offset'] + len(rows):,} of {data['matching']:,}"
    if data["offset"] + len(rows) < data["matching"]:
        shown += f"; --offset {data['offset'] + len(rows)} for more"
    table = render_table(
        [
            [
                _shown(r["uuid"]),
                _shown(f"{r['source']} -[{r['name']}]-> {r['target']}"),
                stamp(r["retired_at"], missing="-"),
                "SUSPICIOUS" if r["suspicious"] else "",
                _who(r),
            ]
            for r in rows
        ],
        ["uuid", "retired fact", "retired at", "flag", "retired by"],
    )
    lines = [head, shown, table]
    for r in rows:
        if not r["suspicious"]:
            continue
        lines.append(f"{_shown(r['uuid'])}: {_shown(r['fact'])}")
        lines += [
            f"  retired by {_shown(f['uuid'])}: {_shown(f['fact'])}" for f in r["retiring_facts"]
        ]
    return "\n".join(lines)


def _retirements(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.quality.retirements import retirements
    from yuxi_dash.memory.views.gate import VIEW_ACTION, audit_target, open_view

    actor = command_actor(args, action=VIEW_ACTION, target=audit_target(args.user), default="cli")
    access = open_view(args.user, "retirements", actor=actor)
    data = retirements(
        access, suspicious_only=args.suspicious, limit=args.limit, offset=args.offset
    )
    return CommandResult(data, retirements_text(data))


def register(memory_sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    from yuxi_dash.cli.threads import non_negative_int, positive_int

    parser = add_user_command(
        memory_sub,
        "retirements",
        _retirements,
        "retired facts beside what retired them; --suspicious: retired by unrelated facts",
    )
    parser.add_argument(
        "--suspicious",
        action="store_true",
        help="only retirements where no retiring fact shares an entity or the relation name",
    )
    parser.add_argument("--limit", type=positive_int, default=100)
    parser.add_argument("--offset", type=non_negative_int, default=0)
