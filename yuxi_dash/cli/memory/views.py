"""CLI commands: `memory stats|entities|facts|communities|ratification USER`, `flags USER`,
`memory index-health`, `memory repair-indexes` and `memory server status|start|stop`.
`--as-of ISO` on stats, entities and facts, and `memory diff`, are in `cli.memory.history`.

Every memory command goes through `yuxi_dash.memory.views.gate.open_view`, so it
is gated (exit 6 when LaunchDarkly says off, and no graph query runs) and
audited under `--actor`. JSON shapes: `memory stats` prints
{user_id, group_id, entities, episodes, communities, relates_to_edges,
mentions_edges, ..., assistant_only_share}; `flags` prints {flag key: {value, reason}}.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import (
    CommandResult,
    Handler,
    actor_help,
    add_json_flag,
    add_user_command,
    command_actor,
)
from yuxi_dash.cli.memory import assistant_only as assistant_only_commands
from yuxi_dash.cli.memory import facts as fact_commands
from yuxi_dash.cli.memory import history, support
from yuxi_dash.cli.memory import retirements as retirement_commands
from yuxi_dash.cli.output import render_table
from yuxi_dash.errors import MemoryGatedOff, MemoryUnavailable
from yuxi_dash.wording import count, plain, reason_text, stamp


def _access(args: argparse.Namespace, view: str) -> Any:
    from yuxi_dash.memory.views.gate import VIEW_ACTION, open_view

    actor = command_actor(args, action=VIEW_ACTION, target=f"memory:{args.user}", default="cli")
    return open_view(args.user, view, actor=actor)


def _value(key: str, value: Any) -> Any:
    """A record's value for a table cell: moments as `wording.stamp` writes them."""
    if key.endswith("_at") and value not in (None, ""):
        return stamp(value)
    return value


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    return render_table([[_value(c, row.get(c)) for c in columns] for row in rows], columns)


def _lines(data: dict[str, Any]) -> str:
    """``key: value`` lines read as words and numbers, never Python reprs."""
    return "\n".join(f"{key}: {plain(_value(key, v), missing='-')}" for key, v in data.items())


def _stats(args: argparse.Namespace) -> CommandResult:
    if args.as_of is not None:
        return history.stats_as_of(args)
    from yuxi_dash.memory.views import gated_views

    access = _access(args, "stats")
    data = {**gated_views.stats(access), **assistant_only_commands.stats_share(access)}
    return CommandResult(data, _lines(data))


def _entities(args: argparse.Namespace) -> CommandResult:
    if args.as_of is not None:
        return history.entities_as_of(args)
    from yuxi_dash.memory.views import gated_views

    data = gated_views.entities(
        _access(args, "entities"), search=args.search, limit=args.limit, offset=args.offset
    )
    shown, total = len(data["entities"]), data["total"]
    if shown:
        span = f"{args.offset + 1:,}–{args.offset + shown:,} of {total:,} entities"
        more = f"; --offset {args.offset + shown} for more" if args.offset + shown < total else ""
        text = f"{span}{more}\n" + _table(data["entities"], ["uuid", "name", "labels"])
    elif total:
        last = (total - 1) // args.limit * args.limit
        text = (
            f"{total:,} entities; none at offset {args.offset} (the last page is --offset {last})"
        )
    else:
        text = "no entities match"
    return CommandResult(data, text)


def _facts(args: argparse.Namespace) -> CommandResult:
    if args.as_of is not None:
        return history.facts_as_of(args)
    from yuxi_dash.memory.views import gated_views

    access = _access(args, "facts")
    if args.entity:
        data = gated_views.entity_detail(access, args.entity, limit=args.limit, offset=args.offset)
        rows = data["facts"]
    else:
        data = gated_views.facts(access, limit=args.limit, offset=args.offset)
        rows = data["facts"]
    # the uuid first: every correction command (`memory retract FACT_UUID ...`) takes it
    text = _table(rows, ["uuid", "source", "name", "target", "status", "source_kind", "created_at"])
    return CommandResult(data, text)


def _communities(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.views import gated_views

    data = gated_views.communities(_access(args, "communities"), limit=args.limit)
    text = (
        _table(data["communities"], ["name", "members", "created_at"])
        + f"\nrebuild: {data['rebuild']['message']}"
    )
    return CommandResult(data, text)


def _ratification(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.views import gated_views

    data = gated_views.ratification(_access(args, "ratification"), limit=args.limit)
    text = (
        f"by status: {plain(data['by_status'])}\n"
        f"next pass: {plain(data['next_pass'])}\n"
        + _table(data["tentative"], ["fact", "age_days", "hits", "action"])
    )
    return CommandResult(data, text)


def _index_health(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.views import index_views

    if args.user is None or args.all:
        actor = command_actor(
            args, action="memory.index_health_scan", target="memory:*", default="cli"
        )
        rows = index_views.index_health_scan(actor=actor, limit=args.limit)
        text = _table(
            [r for r in rows if not r["gated_off"]],
            ["user_id", "index_path_facts", "label_free_facts", "drift"],
        )
        return CommandResult(rows, text, exit_code=0)
    data = index_views.index_health(_access(args, "index_health"))
    text = (
        f"facts via the relationship index {count(data['index_path_facts'])}, "
        f"label-free {count(data['label_free_facts'])}, drift {count(data['drift'])}"
    )
    return CommandResult(data, text)


def _repair(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.views.gate import REPAIR_ACTION
    from yuxi_dash.memory.views.index_views import repair_indexes

    target = f"memory:{args.user}"
    actor = command_actor(args, action=REPAIR_ACTION, target=target, default="cli")
    data = repair_indexes(args.user, actor=actor)
    text = (
        f"rebuilt {len(data['statements'])} index statements; drift "
        f"{data['before']['drift']} -> {data['after']['drift']}"
    )
    return CommandResult(data, text)


def _server(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.memory.graph.server import (
        embedded_handle,
        ensure_server,
        running_pid,
        stop_server,
    )
    from yuxi_dash.settings import get_settings

    settings = get_settings()
    if args.action == "stop":
        stopped = stop_server(settings)
        data = {"stopped": stopped, "data_dir": str(settings.falkordb_data_dir)}
        return CommandResult(data, "stopped" if stopped else "no embedded server was running")
    if args.action != "start" and settings.falkordb_embedded:
        handle = embedded_handle(settings)
    else:
        handle = ensure_server(settings)
    if handle is None:
        pid = running_pid(settings)  # running but busy: say so, never "not running"
        data = {"running": pid is not None, "data_dir": str(settings.falkordb_data_dir)}
        if pid is None:
            return CommandResult(data, "no embedded server is running")
        data.update(pid=pid, answering=False)
        text = f"the embedded server runs (pid {pid}) but did not answer; try again"
        return CommandResult(data, text, exit_code=MemoryUnavailable.exit_code)
    data = {
        "running": True,
        "kind": handle.kind,
        "pid": handle.pid,
        "unix_socket": str(handle.unix_socket) if handle.unix_socket else None,
        "host": handle.host,
        "port": handle.port,
        "started_now": handle.started,
    }
    return CommandResult(data, handle.describe() + (f", pid {handle.pid}" if handle.pid else ""))


def _flags(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.cli.threads import cli_refusals
    from yuxi_dash.memory.views.gate import gates_for, group_for, launchdarkly_hint

    with cli_refusals(args, "memory.flags", f"memory:{args.user}"):
        group_for(args.user)  # a malformed user id: invalid_input, on record
    gates = gates_for(args.user)
    data = gates.to_dict()
    text = "\n".join(
        f"{flag.key}: {'on' if flag.value else 'off'} ({reason_text(flag.reason)})"
        for flag in (gates.memory, gates.communities)
    )
    if not gates.memory_on:  # as every memory command would exit: gated off
        hint = launchdarkly_hint(gates)  # no LaunchDarkly source at all: say how to set one
        if hint is not None:
            text += f"\nmemory is gated off for every user: {hint}"
        return CommandResult(data, text, exit_code=MemoryGatedOff.exit_code)
    return CommandResult(data, text)


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser (pages and limits fit 64 bits)."""
    from yuxi_dash.cli.threads import non_negative_int, positive_int

    memory = sub.add_parser("memory", help="read one user's Graphiti memory (gated, audited)")
    memory_sub = memory.add_subparsers(dest="memory_command", metavar="VIEW")
    memory_sub.required = True

    def view(name: str, handler: Handler, help_text: str) -> argparse.ArgumentParser:
        return add_user_command(memory_sub, name, handler, help_text)

    stats = view(
        "stats", _stats, "counts: entities, episodes, communities, directed edges, statuses"
    )
    history.add_as_of(stats)
    entities = view("entities", _entities, "entities, searchable by name")
    entities.add_argument("--search", default="", help="substring of the entity name")
    entities.add_argument("--limit", type=positive_int, default=50)
    entities.add_argument("--offset", type=non_negative_int, default=0)
    history.add_as_of(entities)
    facts = view("facts", _facts, "facts, newest first, or one entity's facts")
    facts.add_argument("--entity", default=None, help="an entity uuid: its facts as source/target")
    facts.add_argument("--limit", type=positive_int, default=100)
    facts.add_argument("--offset", type=non_negative_int, default=0)
    history.add_as_of(facts)
    communities = view("communities", _communities, "communities and the rebuild decision")
    communities.add_argument("--limit", type=positive_int, default=50)
    ratification = view("ratification", _ratification, "tentative facts and the next pass")
    ratification.add_argument("--limit", type=positive_int, default=200)

    health = memory_sub.add_parser(
        "index-health", help="relationship-index path vs label-free fact count (index drift)"
    )
    health.add_argument("user", metavar="USER", nargs="?", default=None, help="omit for --all")
    health.add_argument("--all", action="store_true", help="every user graph (gated-off skipped)")
    health.add_argument("--limit", type=positive_int, default=500)
    health.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(health)
    health.set_defaults(handler=_index_health)
    repair = view("repair-indexes", _repair, "drop and rebuild the user's relationship indexes")
    del repair

    support.register(memory_sub)  # forget, bundle

    server = memory_sub.add_parser("server", help="the embedded FalkorDB server: status|start|stop")
    server.add_argument("action", choices=["status", "start", "stop"])
    add_json_flag(server)
    server.set_defaults(handler=_server)

    fact_commands.register(memory_sub)
    assistant_only_commands.register(memory_sub)  # assistant-only, retract-assistant-only
    retirement_commands.register(memory_sub)  # retirements USER
    history.register(memory_sub)  # diff USER --from --to

    flags = sub.add_parser(
        "flags",
        help="the memory gates for a user and LaunchDarkly's reasons (exit 6 when gated off)",
    )
    flags.add_argument("user", metavar="USER")
    add_json_flag(flags)
    flags.set_defaults(handler=_flags)
