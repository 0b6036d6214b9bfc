"""What a summary keeps of the evidence it summarized, and the evidence index saved beside it.

The engine runs this after any summarizer returns (manual compress or middleware alike): a
summarizer's text is never trusted to keep the evidence.
- Kept in view: first in the summary's ARTIFACTS AND REFERENCES section, one compact line per
  ledger item the assistant cited, then per item the user named, each in order of appearance,
  while the block fits ``budget_tokens``; the rest is counted ("N more cited or named items are
  in the evidence index"). The block ends with the index's path (``evidence_block``).
- The evidence index (``compression.evidence_index``): every item with where it lives, saved
  as ``session_<id>.evidence-<key>.tsv`` beside the session's history file (``key``: the
  history section's, so a retry replaces it). No block and no index when there is no item.
``kept_evidence`` writes nothing and reads only through the workdir it is given (the estimate
gives none); ``keep_evidence`` also saves the index. Their ledger equals ``build_ledger`` on
the new state with the index as an extra file, from one ``build_ledger`` run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace

from yuxi_dash.compression.compaction import PendingOffload
from yuxi_dash.compression.evidence_index import evidence_index_text
from yuxi_dash.compression.evidence_ledger import Ledger, LedgerItem, appears, build_ledger
from yuxi_dash.compression.previews.clipping import clip_head_tail
from yuxi_dash.compression.thread_state import ThreadContextState
from yuxi_dash.errors import WorkdirUnavailable
from yuxi_dash.files.workdir import Workdir, history_relpath

SECTION = "ARTIFACTS AND REFERENCES"
CITED = "Cited: "
NAMED = "Named by the user: "
MORE = "more cited or named items are in the evidence index"
POINTER = "Evidence index (every evidence item of the summarized messages, where it lives): "
CHARS_PER_TOKEN = 4  # the engine's counter's rate (langchain-core's count_tokens_approximately)
DETAIL_CHARS = 60  # a title is clipped to this, a longer source is its last part; a value never
PLACEHOLDER = "- (none found)"  # the extractive summarizer's empty section
_KIND_WORDS = {
    "kb_record": "record",
    "web_result": "",
    "saved_result": "saved result",
    "file": "file",
    "run": "run",
    "thread": "thread",
}
_HEADING_NOISE = re.compile(r"[#*_:\s\d.)]+")
_KEPT_LINE = re.compile(
    r"^\s*[-*]\s+(?:"
    + "|".join(re.escape(mark) for mark in (CITED, NAMED, POINTER))
    + r"|\d[\d,]* "
    + re.escape(MORE)
    + ")"
)
_POINTER_LINE = re.compile(r"^\s*[-*]\s+" + re.escape(POINTER) + r"(\S+)\s*$", re.MULTILINE)
StateFor = Callable[[str], ThreadContextState]  # summary text -> the new state it makes


@dataclass(frozen=True)
class KeptEvidence:
    """A summary with its kept evidence, and the ledger of the state it makes."""

    summary: str  # the summary text to write, kept block included
    ledger: Ledger
    index_path: str | None  # where the evidence index is (to be) saved; None: no item
    kept: tuple[LedgerItem, ...]  # the cited and named items the block shows
    more: int  # the cited and named items left to the index
    block_tokens: int  # the block's size (the budget's unit)


def text_tokens(text: str) -> int:
    """Tokens of ``text`` by the engine's rate (chars / 4, rounded up), no message overhead."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def evidence_index_path(session_id: str, key: int) -> str:
    """The evidence index of the history section ``key`` of a session, beside its history."""
    return f"{history_relpath(session_id).removesuffix('.md')}.evidence-{key}.tsv"


def with_originals(
    state: ThreadContextState, pending: Sequence[PendingOffload]
) -> ThreadContextState:
    """``state`` with each planned offload's original result back: the ledger's "before"."""
    if not pending:
        return state
    messages = list(state.messages)
    for offload in pending:
        messages[offload.index] = offload.original
    return replace(state, messages=messages)


def named_evidence_index(summary: str) -> str | None:
    """The evidence index a summary (or its message's text) names, or None: for a reader that
    has only the state (a checkpoint's summarization event), as ``build_ledger``'s extra file."""
    found = _POINTER_LINE.findall(summary)
    return found[-1] if found else None


def without_kept_lines(summary: str) -> str:
    """``summary`` without the lines of a kept-evidence block (a previous summary's)."""
    if not any(mark in summary for mark in (CITED, NAMED, POINTER, MORE)):
        return summary
    return "\n".join(line for line in summary.split("\n") if not _KEPT_LINE.match(line))


def _is_section(line: str) -> bool:
    return _HEADING_NOISE.sub(" ", line).strip().upper() == SECTION


def _section_at(lines: Sequence[str]) -> int | None:
    return next((n for n, line in enumerate(lines) if _is_section(line)), None)


def _without_placeholder(summary: str) -> str:
    """``summary`` without a "(none found)" line in its ARTIFACTS AND REFERENCES section."""
    lines = summary.split("\n")
    at = _section_at(lines)
    if at is None or at + 1 >= len(lines) or lines[at + 1].strip() != PLACEHOLDER:
        return summary
    return "\n".join([*lines[: at + 1], *lines[at + 2 :]])


def _compact(text: str | None, *, path: bool = False) -> str | None:
    """``text`` on one line, at most ``DETAIL_CHARS``; a long path: ``…/`` and its last part."""
    if not text:
        return None
    text = " ".join(text.split())
    if path and len(text) > DETAIL_CHARS and "/" in text.rstrip("/"):
        text = "…/" + text.rstrip("/").rsplit("/", 1)[1]
    return clip_head_tail(text, DETAIL_CHARS)


def _value_text(value: str) -> str:
    """The value as the ledger finds it: as written when plain, else as a JSON string."""
    plain = value.isprintable() and value == value.strip() and value != ""
    return value if plain else json.dumps(value, ensure_ascii=False)


def item_line(item: LedgerItem) -> str:
    """One kept item, compactly: ``- Cited: record ID (source SOURCE, chunk N)``."""
    mark = CITED if item.cited else NAMED
    word = _KIND_WORDS[item.kind]
    details = []
    if item.kind == "kb_record":
        source = _compact(item.source, path=True)
        details += [f"source {source}"] if source else []
        details += [f"chunk {item.chunk_index}"] if item.chunk_index is not None else []
    elif item.kind == "web_result" and item.title:
        details.append(json.dumps(_compact(item.title), ensure_ascii=False))
    detail = f" ({', '.join(details)})" if details else ""
    return f"- {mark}{word + ' ' if word else ''}{_value_text(item.value)}{detail}"


def evidence_block(
    ledger: Ledger, index_path: str, budget_tokens: int
) -> tuple[list[str], tuple[LedgerItem, ...], int]:
    """(the block's lines, the items it shows, how many cited or named ones it leaves out).

    A record shows its id, source and chunk (a long source by its last part), a url its
    title. The budget counts the block's own lines, the count of the rest and the pointer;
    an item too long for what is left is skipped and counted. The pointer and the count are
    written even when the budget is too small for them.
    """
    wanted = [item for item in ledger.items if item.cited]
    wanted += [item for item in ledger.items if item.named_by_user and not item.cited]
    pointer = f"- {POINTER}{index_path}"
    lines = [item_line(item) for item in wanted]
    costs = [text_tokens(line + "\n") for line in lines]  # per line, rounded up: never under
    room = budget_tokens - text_tokens(pointer)
    if sum(costs) > room:
        room -= text_tokens(f"- {len(wanted):,} {MORE}\n")  # the count's line, at its longest
    kept_lines: list[str] = []
    kept: list[LedgerItem] = []
    for item, line, cost in zip(wanted, lines, costs, strict=True):
        if cost <= room:
            kept_lines.append(line)
            kept.append(item)
            room -= cost
    more = len(wanted) - len(kept)
    if more:
        kept_lines.append(f"- {more:,} {MORE}")
    return [*kept_lines, pointer], tuple(kept), more


def _with_block(summary: str, block: list[str]) -> tuple[str, str]:
    """(the summary with ``block`` first in its ARTIFACTS AND REFERENCES section, the text
    added). A summary without that section gets one at its end."""
    lines = summary.split("\n")
    at = _section_at(lines)
    if at is not None:
        return "\n".join([*lines[: at + 1], *block, *lines[at + 1 :]]), "\n".join(block)
    added = "\n".join([f"## {SECTION}", *block])
    return f"{summary.rstrip()}\n\n{added}", added


def _may_move(item: LedgerItem) -> bool:
    """Whether more text in the view or the index can change the item's state."""
    return item.state == "recoverable" or (item.state == "lost" and item.kind != "saved_result")


def _seen_in(ledger: Ledger, added: str) -> Ledger:
    """The ledger once ``added`` is in the view: an item it names is visible. A saved result
    lost before stays lost (its file is gone or changed, whatever names it)."""
    items = tuple(
        replace(item, state="visible", file=None, line=None)
        if _may_move(item) and appears(added, item.value)
        else item
        for item in ledger.items
    )
    return replace(ledger, items=items)


def _found_in_index(ledger: Ledger, path: str, text: str) -> Ledger:
    """The ledger once the index at ``path`` holds ``text``: an item lost until now is
    recoverable at the first line naming it (a lost saved result stays lost)."""
    lines = text.split("\n")
    items = []
    for item in ledger.items:
        if item.state == "lost" and _may_move(item):
            line = next((n for n, row in enumerate(lines, 1) if appears(row, item.value)), None)
            if line is not None:
                item = replace(item, state="recoverable", file=path, line=line)
        items.append(item)
    return replace(ledger, items=tuple(items))


def kept_evidence(
    before: ThreadContextState,
    summary: str,
    state_for: StateFor,
    *,
    key: int,
    budget_tokens: int,
    workdir: Workdir | None = None,
    written: Collection[str] = (),
) -> KeptEvidence:
    """The summary with its kept evidence (module docstring); writes nothing.

    Lines of an earlier block (a previous summary carried into this one) are dropped first:
    the new block covers every message the old one did. The ledger is built once, on the
    state before the block is added; an item the block names is then visible.

    ``before``: the state as it was, offloaded originals in place (``with_originals``);
    ``state_for(text)``: the state a summary text makes (``engine.summarized_state``); ``key``:
    the history section's. The ledger's index items are not recoverable yet: the index is
    not saved (``keep_evidence`` saves it).
    """
    stripped = without_kept_lines(summary)
    cleaned = _without_placeholder(stripped)
    new_state = state_for(cleaned)
    ledger = build_ledger(before, new_state, workdir, written=written)
    if not ledger.items:
        return KeptEvidence(stripped, ledger, None, (), 0, 0)
    path = evidence_index_path(new_state.history_session_id, key)
    block, kept, more = evidence_block(ledger, path, budget_tokens)
    text, added = _with_block(cleaned, block)
    ledger = _seen_in(ledger, added)
    now = {(item.kind, item.value): item for item in ledger.items}
    kept = tuple(now[(item.kind, item.value)] for item in kept)  # as they are now: in view
    return KeptEvidence(text, ledger, path, kept, more, text_tokens("\n".join(block)))


def keep_evidence(
    before: ThreadContextState,
    summary: str,
    state_for: StateFor,
    *,
    key: int,
    budget_tokens: int,
    workdir: Workdir,
    written: Collection[str] = (),
) -> KeptEvidence:
    """``kept_evidence``, then the evidence index saved; its ledger counts the index.

    A failed index write is WorkdirUnavailable: the state is not changed (the files already
    written are the ones a failed history write leaves).
    """
    kept = kept_evidence(
        before,
        summary,
        state_for,
        key=key,
        budget_tokens=budget_tokens,
        workdir=workdir,
        written=written,
    )
    if kept.index_path is None:
        return kept
    text = evidence_index_text(kept.ledger)
    try:
        workdir.write_file(kept.index_path, text)
    except OSError as exc:
        raise WorkdirUnavailable(
            f"evidence index could not be written ({type(exc).__name__}); "
            "the thread's state was not changed"
        ) from exc
    return replace(kept, ledger=_found_in_index(kept.ledger, kept.index_path, text))
