"""The CLI's `context` command: what the next model call of a thread would see.

`build_context_view` reads the thread (an attached one from the platform's checkpointer)
and returns the model view with per-message token counts that add up to `total_tokens`,
beside `next_input_tokens`, the figure every page shows and pressure divides (the agent's
own count, with its system prompt and tool schemas). Heavy modules are imported inside
the handler so `yuxi-dash --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from yuxi_dash.cli.common import CommandResult, add_json_flag
from yuxi_dash.cli.guards import cli_refusals
from yuxi_dash.cli.guards import store_errors as _store_errors
from yuxi_dash.cli.output import percent as _percent
from yuxi_dash.cli.output import render_table
from yuxi_dash.errors import ThreadDeleted


def _message_role(message: Any) -> str:
    from yuxi_dash.compression.thread_view import chat_role, is_summary_message

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


def register(sub: argparse._SubParsersAction) -> None:  # noqa: SLF001
    """Add `context` to the top-level parser."""
    context = sub.add_parser("context", help="what the next model call would see")
    context.add_argument("thread", metavar="THREAD")
    add_json_flag(context)
    context.set_defaults(handler=_store_errors(_cmd_context))
