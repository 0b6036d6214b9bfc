"""CLI commands `yuxi-dash alerts rule add|list|update|delete`, `alerts evaluate`, `alerts list`.

Rule writes need the admin role (YUXI_DASH_CLI_ROLE=admin) and are audited by
`yuxi_dash.alerts.rules`; `evaluate` runs one pass, sends (Alertmanager, the
webhook outbox) as `serve`'s background pass does, and prints the counts of
firing, pending, resolved and notified; `list` prints the current alerts.
"""

from __future__ import annotations

import argparse
from typing import Any

from yuxi_dash.cli.common import CommandResult, actor_help, add_json_flag, command_actor
from yuxi_dash.cli.guards import store_errors
from yuxi_dash.cli.output import iso, percent, render_table


def _rule_fields(args: argparse.Namespace) -> dict[str, Any]:
    enabled = None
    if getattr(args, "enable", False):
        enabled = True
    if getattr(args, "disable", False):
        enabled = False
    return {
        "fire_at": args.fire_at,
        "clear_at": args.clear_at,
        "for_seconds": args.for_seconds,
        "scope": args.scope,
        "agent": args.agent,
        "severity": args.severity,
        "enabled": enabled,
        "compressible_only": args.compressible_only,
    }


def _at(kind: str, value: float) -> str:
    """A rule's threshold as its kind measures it: a ratio, cited items lost, or minutes."""
    if kind == "forecast_crossing":
        return f"{value:g} min"
    return f"{value:g} cited lost" if kind == "cited_evidence_lost" else percent(value)


def _rule_result(info: Any, verb: str) -> CommandResult:
    data = {**info.to_dict(), "updated_at": iso(info.updated_at)}
    return CommandResult(
        data=data,
        text=f"{verb} rule {info.name} ({info.kind}): fires at {_at(info.kind, info.fire_at)}, "
        f"clears {'beyond' if info.kind == 'forecast_crossing' else 'below'} "
        f"{_at(info.kind, info.clear_at)}, for {info.for_seconds} s, "
        f"scope {info.scope}{' ' + info.agent if info.agent else ''}, {info.severity}, "
        f"{'compressible threads only' if info.compressible_only else 'all threads'}",
    )


@store_errors
def _cmd_add(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts import rules

    actor = command_actor(args, action=rules.RULE_ACTION, target=f"rule:{args.name}", default="cli")
    fields = {k: v for k, v in _rule_fields(args).items() if v is not None}
    fields["kind"] = args.kind
    return _rule_result(rules.add_rule(actor, name=args.name, **fields), "added")


@store_errors
def _cmd_update(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts import rules

    actor = command_actor(args, action=rules.RULE_ACTION, target=f"rule:{args.name}", default="cli")
    return _rule_result(rules.update_rule(actor, args.name, **_rule_fields(args)), "updated")


@store_errors
def _cmd_delete(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts import rules

    actor = command_actor(args, action=rules.RULE_ACTION, target=f"rule:{args.name}", default="cli")
    return _rule_result(rules.delete_rule(actor, args.name), "deleted")


@store_errors
def _cmd_rule_list(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts import rules

    found = rules.list_rules()
    rows = [
        [r.name, r.kind, r.scope, r.agent, _at(r.kind, r.fire_at), _at(r.kind, r.clear_at),
         r.for_seconds, r.severity, r.enabled, r.compressible_only]
        for r in found
    ]  # fmt: skip
    headers = ["rule", "kind", "scope", "agent", "fire at", "clear at", "for s", "severity",
               "enabled", "compressible only"]  # fmt: skip
    return CommandResult(
        data=[{**r.to_dict(), "updated_at": iso(r.updated_at)} for r in found],
        text=render_table(rows, headers) if found else "no alert rules",
    )


@store_errors
def _cmd_evaluate(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts.evaluate import evaluate
    from yuxi_dash.alerts.forecast_crossing import CANDIDATES_MAX

    report = evaluate()
    return CommandResult(
        data=report.to_dict(),
        text=f"firing {report.firing:,}, pending {report.pending:,}, "
        f"resolved {report.resolved:,}, notified {report.notified:,} "
        f"(fired {report.fired:,}, alertmanager {report.alertmanager_posted:,}, "
        f"{report.seconds:.2f} s)"
        + (
            f"\n{report.capped_rules:,} forecast rule{'s' if report.capped_rules != 1 else ''} "
            f"read only the {CANDIDATES_MAX:,} most pressured threads active within the horizon"
            if report.capped_rules
            else ""
        ),
    )


@store_errors
def _cmd_list(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.alerts.views import current_alerts

    found = current_alerts()
    rows = [
        [a.state, a.rule, a.thread_id, a.agent, a.platform, _at(a.kind, a.pressure),
         int(a.for_seconds)]
        for a in found
    ]  # fmt: skip
    headers = ["state", "rule", "thread", "agent", "platform", "pressure / lost / min", "for s"]
    return CommandResult(
        data=[{**a.to_dict(), "since": iso(a.since)} for a in found],
        text=render_table(rows, headers) if found else "no pending or firing alerts",
    )


def _rule_options(parser: argparse.ArgumentParser, *, adding: bool) -> None:
    parser.add_argument("--name", required=True, help="the rule's name")
    if adding:
        parser.add_argument(
            "--kind",
            choices=["pressure", "cited_evidence_lost", "forecast_crossing"],
            default="pressure",
            help="pressure: summary pressure of a thread (default); cited_evidence_lost: the "
            "cited evidence items the thread's newest compression lost (--fire-at and "
            "--clear-at are item counts, default 1 and 1: fires on any, resolves on none); "
            "forecast_crossing: a thread forecast to reach 100%% within --fire-at minutes "
            "(default 60; resolves beyond --clear-at minutes, default --fire-at, or when "
            "compressed)",
        )
    parser.add_argument(
        "--fire-at",
        dest="fire_at",
        type=float,
        help="pressure: a ratio of the summary threshold (default 0.85); cited_evidence_lost: "
        "items lost (default 1); forecast_crossing: minutes, the horizon (default 60)",
    )
    parser.add_argument(
        "--clear-at",
        dest="clear_at",
        type=float,
        help="pressure: resolves below this ratio (default 0.80); cited_evidence_lost: below "
        "this count (default 1); forecast_crossing: beyond these minutes (default --fire-at; "
        "moves with --fire-at while equal to it)",
    )
    parser.add_argument(
        "--for", dest="for_seconds", type=int, help="seconds the condition must hold"
    )
    parser.add_argument("--scope", choices=["all", "agent", "attached", "own"])
    parser.add_argument("--agent", help="only this agent's threads")
    parser.add_argument("--severity", choices=["info", "warning", "critical"])
    if not adding:
        parser.add_argument("--enable", action="store_true")
    parser.add_argument("--disable", action="store_true")
    threads = parser.add_mutually_exclusive_group()
    threads.add_argument(
        "--compressible-only",
        dest="compressible_only",
        action="store_const",
        const=True,
        help="only threads that can be compressed" + (" (the default)" if adding else ""),
    )
    threads.add_argument(
        "--all-threads",
        dest="compressible_only",
        action="store_const",
        const=False,
        help="also threads whose agent cannot be compressed or the platform refused",
    )
    parser.set_defaults(compressible_only=True if adding else None)
    parser.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(parser)  # fmt: skip


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    alerts = sub.add_parser("alerts", help="per-thread pressure alerts: rules, evaluate, list")
    group = alerts.add_subparsers(dest="alerts_command", metavar="ACTION")
    group.required = True
    rule = group.add_parser("rule", help="alert rules (writes need the admin role)")
    rule_sub = rule.add_subparsers(dest="rule_command", metavar="ACTION")
    rule_sub.required = True
    add = rule_sub.add_parser("add", help="add a rule")
    _rule_options(add, adding=True)
    add.set_defaults(handler=_cmd_add)
    update = rule_sub.add_parser("update", help="change a rule")
    _rule_options(update, adding=False)
    update.set_defaults(handler=_cmd_update)
    delete = rule_sub.add_parser("delete", help="delete a rule (its alerts resolve)")
    delete.add_argument("--name", required=True)
    delete.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(delete)
    delete.set_defaults(handler=_cmd_delete)
    listing = rule_sub.add_parser("list", help="list the rules")
    add_json_flag(listing)
    listing.set_defaults(handler=_cmd_rule_list)
    evaluate = group.add_parser("evaluate", help="one evaluation pass, then delivery")
    add_json_flag(evaluate)
    evaluate.set_defaults(handler=_cmd_evaluate)
    current = group.add_parser("list", help="the pending and firing alerts")
    add_json_flag(current)
    current.set_defaults(handler=_cmd_list)
