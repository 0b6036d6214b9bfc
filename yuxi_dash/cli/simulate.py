"""The `simulate` command: play turns of a real agent graph with a deterministic fake model.

Validates the user and agent (a refusal is audited), runs `yuxi_dash.sim.run.simulate`
and shows one row per thread. Heavy modules are imported inside the handler so
`yuxi-dash --help` stays fast.
"""

from __future__ import annotations

import argparse

from yuxi_dash.cli.arguments import positive_int, seconds
from yuxi_dash.cli.common import CommandResult, add_json_flag
from yuxi_dash.cli.guards import cli_refusals, store_errors
from yuxi_dash.cli.output import percent, render_table


def _cmd_simulate(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash import validation
    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.run import simulate

    with cli_refusals(args, "cli.simulate", "threads:*"):
        validation.optional_identifier(args.user, "user id")
        validation.optional_identifier(args.agent, "agent")
    report = simulate(
        get_settings(),
        threads=args.threads,
        turns=args.turns,
        seed=args.seed,
        user_id=args.user,
        agent_slug=args.agent,
        pace_seconds=args.pace,
    )
    data = report.to_dict()
    rows = [
        (
            item["thread_id"],
            item["turns"],
            item["model_calls"],
            item["auto_compactions"],
            item["summaries"],
            item["offloaded_results"],
            percent(item["summary_pressure_ratio"]),
        )
        for item in data["threads"]
    ]
    table = render_table(
        rows,
        (
            "THREAD",
            "TURNS",
            "MODEL CALLS",
            "AUTO COMPACTIONS",
            "SUMMARIES",
            "OFFLOADED",
            "PRESSURE",
        ),
    )
    return CommandResult(data, text=table)


# ---------------------------------------------------------------------------
# registration
# ---------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add this group's commands to the top-level parser."""
    simulate = sub.add_parser(
        "simulate", help="play turns of a real agent graph (deterministic fake model)"
    )
    simulate.add_argument("--threads", type=positive_int, default=3, metavar="N")
    simulate.add_argument("--turns", type=positive_int, default=6, metavar="N")
    simulate.add_argument("--seed", type=int, default=7, metavar="S")
    simulate.add_argument("--user", metavar="USER_ID", help="default: demo users in turn")
    simulate.add_argument("--agent", metavar="SLUG", help="default: ops-copilot")
    simulate.add_argument(
        "--pace", type=seconds, default=0.0, metavar="SECONDS", help="pause after each model call"
    )
    add_json_flag(simulate)
    simulate.set_defaults(handler=store_errors(_cmd_simulate))
