"""The CLI's `context`, `compressions` and `costs` commands: what the next model call of a thread
would see, and what each compression kept in view, left recoverable or lost.

`build_context_view` reads the thread (an attached one from the platform's checkpointer)
and returns the model view with per-message token counts that add up to `total_tokens`,
beside `next_input_tokens`, the figure every page shows and pressure divides (the agent's
own count, with its system prompt and tool schemas). `compressions [THREAD]` prints the
compression records, newest first (`api.thread_compressions`, the API's body); as text one
block per record: when, trigger and actor, tokens, the evidence per state, the cited kept
in view ("3 of 12"), then the recoverable (`file:line`) and lost items, cited first, every
outside string escaped. Any role may read both. Heavy modules are imported inside the
handlers so `yuxi-dash --help` stays fast. `costs` prints what the recorded model calls
cost (`costs.spend`), or their tokens and how to see dollars without a prices file.
`tune` replays an agent's recorded threads under proposed compression settings beside the
ones in force (`tuning.plan`; operator role, one audit row) and ends with the fields to copy.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from yuxi_dash.cli.arguments import add_page_flags, positive_int
from yuxi_dash.cli.common import CommandResult, actor_help, add_json_flag
from yuxi_dash.cli.guards import cli_refusals
from yuxi_dash.cli.guards import store_errors as _store_errors
from yuxi_dash.cli.output import percent as _percent
from yuxi_dash.cli.output import render_table
from yuxi_dash.errors import ThreadDeleted
from yuxi_dash.outside_text import escaped_controls
from yuxi_dash.wording import stamp


def _message_role(message: Any) -> str:
    from yuxi_dash.compression.thread_state import chat_role, is_summary_message

    return "summary" if is_summary_message(message) else chat_role(message)


def _message_preview(message: Any, width: int = 160) -> str:
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    if not content and getattr(message, "tool_calls", None):
        content = "calls " + ", ".join(call["name"] for call in message.tool_calls)
    content = " ".join(content.split())
    return content if len(content) <= width else content[: width - 3] + "..."


def build_context_view(thread_id: str) -> dict[str, Any]:
    """What the next model call of `thread_id` would see, with token counts.

    The view is `yuxi_dash.compression.context_view` (summary first, long
    write_file arguments shortened), so the total equals the engine's count
    and the per-message counts add up to it.
    """
    from langchain_core.messages import AIMessage, ToolMessage

    from yuxi_dash.compression import context_view
    from yuxi_dash.sources import thread_store
    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.queries import get_thread
    from yuxi_dash.usage import next_input_tokens

    with session_scope() as session:
        detail = get_thread(session, thread_id, store_for=thread_store)  # attached: the platform's
    if detail.summary.status == "deleted":
        raise ThreadDeleted(f"thread {thread_id} is deleted")
    state = detail.state
    view = context_view(state)
    messages: list[dict[str, Any]] = []
    saved: list[dict[str, Any]] = []
    for item in view.messages:
        message = item.message
        entry: dict[str, Any] = {
            "index": item.index,
            "role": _message_role(message),
            "tokens": item.tokens,
            "preview": _message_preview(message),
            "content": message.content,  # exactly what the model is sent (str or content blocks)
        }
        if isinstance(message, ToolMessage):
            entry["tool_name"] = message.name
            entry["tool_call_id"] = message.tool_call_id
            entry["offloaded"] = item.saved is not None
            if item.saved is not None:
                saved.append(
                    {
                        "index": item.index,
                        "tool_name": item.saved.tool or message.name,
                        "tool_call_id": message.tool_call_id,
                        "path": item.saved.path or None,
                        "sha256": item.saved.sha256 or None,
                        "original_tokens": item.saved.approx_tokens,
                        "tokens": item.tokens,
                        "preview": message.content,
                    }
                )
        if isinstance(message, AIMessage) and message.tool_calls:
            entry["tool_calls"] = [call["name"] for call in message.tool_calls]
        messages.append(entry)
    total = view.total_tokens
    summary = None
    if state.summary is not None:
        summary = {
            "cutoff_index": state.summary.cutoff_index,
            "file_path": state.summary.file_path,
            "tokens": view.messages[0].tokens,
            "content": state.summary.summary_message.content,
        }
    trigger = detail.agent.summary_trigger_tokens if detail.agent else None
    return {
        "thread_id": thread_id,
        "agent": detail.summary.agent_slug,
        "attached": detail.summary.attached,
        "compression": detail.summary.compression,  # "attached: <platform>" on a platform's
        "checkpoint_id": detail.checkpoint_id,
        "summary_active": state.summary_active(),
        "total_tokens": total,  # this view's count: the messages' tokens add up to it
        # the figure every page and command shows, and pressure divides: the agent's own count
        # at its last model call (with its system prompt and tool schemas)
        "next_input_tokens": next_input_tokens(detail.summary),
        "messages_total": view.messages_total,
        "messages_visible": len(view.messages),
        "summary_trigger_tokens": trigger,
        "summary_pressure_ratio": detail.summary.summary_pressure_ratio if trigger else None,
        "summary": summary,
        "saved_results": saved,
        "messages": messages,
    }


SUMMARY_TEXT_LINES = 14
SAVED_PREVIEW_LINES = 3


def _indented(text: str, *, max_lines: int, width: int = 110) -> list[str]:
    lines = [
        line if len(line) <= width else line[: width - 3] + "..." for line in text.splitlines()
    ]
    shown = [f"    {line}" for line in lines[:max_lines]]
    if len(lines) > max_lines:
        shown.append(f"    ... ({len(lines) - max_lines} more lines; --json has all of it)")
    return shown


def _cmd_context(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash import validation
    from yuxi_dash.compression import parse_saved_result

    with cli_refusals(args, "cli.context", f"thread:{args.thread}"):
        validation.thread_id(args.thread)
        view = build_context_view(args.thread)  # unknown or deleted: refused, on record
    rows = [
        (
            "summary" if entry["index"] is None else str(entry["index"]),  # an id: no commas
            entry["role"],
            entry["tokens"],
            entry["preview"],
        )
        for entry in view["messages"]
    ]
    owner = f"{view['compression']}, " if view["attached"] else ""
    lines = [
        f"thread {view['thread_id']} ({owner}agent {view['agent']}, "
        f"checkpoint {view['checkpoint_id']})",
        f"next input: {view['next_input_tokens']:,} tokens"
        + (
            f"; {_percent(view['summary_pressure_ratio'])} of the "
            f"{view['summary_trigger_tokens']:,}-token summary threshold"
            if view["summary_trigger_tokens"]
            else ""
        ),
        f"this view counts {view['total_tokens']:,} tokens in {view['messages_visible']} of "
        f"{view['messages_total']} messages (the rest of the next input: the system prompt, "
        "tool schemas and tool-call arguments the agent counts in full)",
    ]
    if view["summary"]:
        lines.append(
            f"summary active: messages before {view['summary']['cutoff_index']} are summarized "
            f"({view['summary']['tokens']:,} tokens); history in {view['summary']['file_path']}"
        )
    lines.append("")
    lines.append(render_table(rows, ("#", "ROLE", "TOKENS", "CONTENT")))
    if view["summary"]:
        lines.extend(["", "summary:"])
        lines.extend(_indented(view["summary"]["content"], max_lines=SUMMARY_TEXT_LINES))
    if view["saved_results"]:
        lines.extend(
            ["", f"saved tool results (the model sees previews): {len(view['saved_results'])}"]
        )
        for item in view["saved_results"]:
            original = item["original_tokens"]
            lines.append(
                f"#{item['index']} {item['tool_name']}: "
                f"{original:,} tokens saved, {item['tokens']:,} shown; "
                f"{item['path']} sha256 {str(item['sha256'])[:16]}"
                if original is not None
                else f"#{item['index']} {item['tool_name']}: {item['path']}"
            )
            header = parse_saved_result(item["preview"])
            shown = "\n".join(filter(None, (header.preview, header.note))) if header else ""
            lines.extend(_indented(shown or item["preview"], max_lines=SAVED_PREVIEW_LINES))
    return CommandResult(view, text="\n".join(lines))


COMPRESSIONS_ACTION = "cli.compressions"  # the audit action of a refused read
LIST_LIMIT = 20  # records a listing shows unless --limit says otherwise
ITEMS_SHOWN = 15  # recoverable (and lost) items a block lists; --json has every one
STATES = ("visible", "recoverable", "lost")


def _text(value: Any) -> str:
    """Outside text on one line, its control characters written out."""
    return escaped_controls(str(value))


def _cited_line(cited: dict[str, int]) -> str:
    total = sum(cited.get(state, 0) for state in STATES)
    if not total:
        return "cited kept in view: none cited in the summarized part"
    kept = cited.get("visible", 0)
    return (
        f"cited kept in view: {kept:,} of {total:,} "
        f"({cited.get('recoverable', 0):,} recoverable, {cited.get('lost', 0):,} lost)"
    )


def _item_line(item: dict[str, Any]) -> str:
    mark = "cited " if item.get("cited") else ""
    where = ""
    if item.get("state") == "recoverable" and item.get("file"):
        where = f"  {_text(item['file'])}:{item.get('line') or 1}"
    return f"    {mark}{_text(item.get('kind'))} {_text(item.get('value'))}{where}"


def _items_block(items: list[dict[str, Any]], state: str) -> list[str]:
    chosen = [item for item in items if item.get("state") == state]
    if not chosen:
        return []
    chosen.sort(key=lambda item: not item.get("cited"))  # cited first, else in order
    lines = [f"  {state} ({len(chosen):,}):"]
    lines.extend(_item_line(item) for item in chosen[:ITEMS_SHOWN])
    if len(chosen) > ITEMS_SHOWN:
        lines.append(f"    ... {len(chosen) - ITEMS_SHOWN:,} more (--json has every one)")
    return lines


def record_block(record: dict[str, Any], *, with_thread: bool) -> str:
    """One record as people read it (module docstring)."""
    ledger = record.get("ledger") or {}
    totals = ledger.get("totals") or {}
    who = f" by {_text(record['actor'])}" if record.get("actor") else ""
    thread = f"thread {_text(record['thread_id'])}, " if with_thread else ""
    lines = [
        f"{stamp(record['at'])}  {_text(record['trigger'])}{who} "
        f"({thread}{_text(record['origin'])}, agent {_text(record['agent_slug'])})",
        f"  tokens {record['before_tokens']:,} -> {record['after_tokens']:,}; "
        f"{record['compressed_messages']:,} messages summarized"
        + (f"; history in {_text(record['history_file'])}" if record.get("history_file") else ""),
        "  evidence: " + ", ".join(f"{totals.get(state, 0):,} {state}" for state in STATES),
        f"  {_cited_line(ledger.get('cited') or {})}",
    ]
    items = list(ledger.get("items") or [])
    lines.extend(_items_block(items, "recoverable"))
    lines.extend(_items_block(items, "lost"))
    return "\n".join(lines)


def _shown(data: dict[str, Any], args: argparse.Namespace) -> str:
    """The line under the blocks: how many of how many, and how to see more."""
    whose = f"thread {_text(data['thread_id'])}" if data["thread_id"] else "any thread"
    total, shown = data["total"], len(data["compressions"])
    if not shown:
        if total:
            return f"none at offset {args.offset}: {total:,} compressions recorded for {whose}"
        return f"no compressions recorded for {whose}"
    first, last = args.offset + 1, args.offset + shown
    span = f"{shown:,}" if args.offset == 0 else f"{first:,}–{last:,}"
    more = f"; --offset {last} for more" if last < total else ""
    return f"{span} of {total:,} compressions of {whose}, newest first{more}"


def _cmd_compressions(args: argparse.Namespace) -> CommandResult:
    from yuxi_dash.api.thread_compressions import thread_compressions
    from yuxi_dash.store.db import session_scope

    target = "compressions:*" if args.thread is None else f"thread:{args.thread}"
    with (
        cli_refusals(args, COMPRESSIONS_ACTION, target),  # invalid, unknown, deleted: on record
        session_scope() as session,
    ):
        data = thread_compressions(session, args.thread, limit=args.limit, offset=args.offset)
    blocks = [
        record_block(record, with_thread=args.thread is None) for record in data["compressions"]
    ]
    text = "\n\n".join([*blocks, _shown(data, args)])
    return CommandResult(data, text=text)


COSTS_ACTION = "cli.costs"  # the audit action of a refused read (a bad prices file)
COSTS_HEADERS = {"thread": "THREAD", "user": "USER", "agent": "AGENT", "day": "DAY (UTC)"}


def _cmd_costs(args: argparse.Namespace) -> CommandResult:
    """The recorded model calls and their dollars per thread, user, agent or day
    (`costs.spend`); without a prices file, tokens and the hint."""
    from yuxi_dash.costs.prices import (
        NO_PRICES_HINT,
        dollars,
        load_prices,
        unmatched_keys,
        unmatched_line,
        unpriced_line,
    )
    from yuxi_dash.costs.spend import limited, matched_names, spend
    from yuxi_dash.settings import get_settings
    from yuxi_dash.store.db import session_scope

    with cli_refusals(args, COSTS_ACTION, f"costs:{args.by}"):
        prices = load_prices(get_settings())  # a bad file: one typed error, on record
    with session_scope() as session:
        every = spend(session, prices, args.by)
        unmatched = unmatched_keys(prices, matched_names(session, prices))
    items = limited(every, args.by, args.limit)  # by day the newest, else the most spent
    unpriced = sum(i.unpriced_calls for i in every)
    data = {
        "by": args.by,
        "priced": prices is not None,
        "hint": None if prices is not None else NO_PRICES_HINT,
        "total": len(every),
        "truncated": len(items) < len(every),
        "unpriced_calls": unpriced,
        "unmatched_keys": unmatched,
        "rows": [item.to_dict() for item in items],
    }
    rows = [
        (i.key, i.model_calls, i.input_tokens, i.output_tokens, dollars(i.cost_usd)) for i in items
    ]
    headers = (COSTS_HEADERS[args.by], "CALLS", "INPUT TOKENS", "OUTPUT TOKENS", "COST")
    lines = [render_table(rows, headers) if items else "no model calls recorded"]
    if len(items) < len(every):
        which = "newest" if args.by == "day" else "most spent"
        lines.append(f"the {which} {len(items):,} of {len(every):,} rows (--limit for more)")
    lines.append(NO_PRICES_HINT if prices is None else unpriced_line(unpriced))
    lines.append(unmatched_line(unmatched))
    return CommandResult(data, text="\n".join(line for line in lines if line))


def _cmd_tune(args: argparse.Namespace) -> CommandResult:
    """Replay the agent's recorded threads under the proposed settings (`tuning.plan`)."""
    from yuxi_dash.cli.common import command_actor, say_progress
    from yuxi_dash.tuning.fleet import ACTION
    from yuxi_dash.tuning.plan import run_tuning
    from yuxi_dash.tuning.report import comparison_rows, config_lines, summary_lines

    actor = command_actor(args, action=ACTION, target=f"agent:{args.agent}", default="cli")

    def progress(done: int, total: int) -> None:
        if done == total or done % max(1, total // 10) == 0:
            say_progress(f"replayed {done:,} of {total:,} threads")

    result = run_tuning(
        args.agent,
        actor=actor,
        summary_threshold_k=args.summary_threshold_k,
        tool_result_token_limit=args.tool_result_token_limit,
        keep_messages=args.keep_messages,
        sample=args.sample,
        seed=args.seed,
        on_progress=progress,
        workers=args.workers,
    )
    table = render_table(comparison_rows(result), ("FIGURE", "IN FORCE", "PROPOSED"))
    lines = [*summary_lines(result), "", table, "", "configuration fields to copy:"]
    lines.extend(config_lines(result.proposed.settings))
    return CommandResult(result.to_dict(), text="\n".join(lines))


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `context`, `compressions`, `costs` and `tune` to the top-level parser."""
    context = sub.add_parser("context", help="what the next model call would see")
    context.add_argument("thread", metavar="THREAD")
    add_json_flag(context)
    context.set_defaults(handler=_store_errors(_cmd_context))

    parser = sub.add_parser(
        "compressions",
        help="what each compression kept in view, left recoverable or lost, newest first",
        description="Compression records, newest first: tokens, the evidence ledger "
        "(visible, recoverable with file:line, lost) and the cited evidence kept in view.",
    )
    parser.add_argument(
        "thread", metavar="THREAD", nargs="?", help="only this thread's (default: every thread)"
    )
    add_page_flags(parser, limit=LIST_LIMIT, order="newest first")
    add_json_flag(parser)
    parser.set_defaults(handler=_store_errors(_cmd_compressions))

    costs = sub.add_parser(
        "costs",
        help="what the recorded model calls cost, per thread, user, agent or day",
        description="Recorded model calls, their tokens and dollars (YUXI_DASH_MODEL_PRICES); "
        "by day the newest N days, oldest first, else the N most spent first.",
    )
    costs.add_argument("--by", choices=("thread", "user", "agent", "day"), default="agent")
    costs.add_argument(
        "--limit", type=positive_int, default=50, metavar="N", help="at most N rows (default 50)"
    )
    add_json_flag(costs)
    costs.set_defaults(handler=_store_errors(_cmd_costs))

    tune = sub.add_parser(
        "tune",
        help="what other compression settings would have done to an agent's recorded threads",
        description="Replay the agent's recorded threads, ours and attached, under the "
        "proposed settings beside the ones in force; nothing is written to any thread.",
    )
    tune.add_argument("--agent", required=True, metavar="AGENT")
    tune.add_argument(
        "--summary-threshold-k", type=int, metavar="K", help="summary_threshold: K tokens (x 1024)"
    )
    tune.add_argument(
        "--tool-result-limit-tokens",
        dest="tool_result_token_limit",
        type=int,
        metavar="N",
        help="summary_tool_result_token_limit: tokens",
    )
    tune.add_argument(
        "--keep-messages", type=int, metavar="M", help="summary_keep_messages: messages kept"
    )
    tune.add_argument("--sample", type=int, metavar="S", help="a stratified sample of S threads")
    tune.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    tune.add_argument("--workers", type=int, default=1, help="processes replaying (default 1)")
    tune.add_argument("--actor", metavar="NAME", help=actor_help())
    add_json_flag(tune)
    tune.set_defaults(handler=_store_errors(_cmd_tune))
