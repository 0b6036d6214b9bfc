"""Evidence ledger bench: what a real compression keeps in view, and what the ledger costs.

Every corpus shape (``bench/corpus.py``) gets the assistant's citations: each answer ends
with ``Sources: [id], url`` naming the leading evidence (record ids, urls) of the results
read since the answer before (1-3 of them), as an assistant cites what it read. Each
thread is compressed for real (``prepare_summary`` + ``write_summary``, the extractive
summarizer, 10 kept messages, the default evidence budget) into a fresh ``Workdir``: the
summary keeps the cited and user-named items in view and saves the evidence index
(``compression.evidence_keep``), and the outcome's ledger (the index counted) gives the
states. The ledger is also built again on its own (``build_ledger``) for its CPU cost.

Printed per shape, the biggest thread (by tokens) last and marked: tokens before and
after, the ledger's items, the cited share kept in view, the share of all span evidence
visible / recoverable / lost, and one ledger build's CPU time as a share of the compression's
own (which now holds one; target <= 10%), with the corpus frozen out of the collector's walks.
For the biggest thread also: the kept block's size against its budget, how many cited or
named items it shows and leaves to the index, and the cited share in view of the same
compression with a budget of 0 (no item kept: what the summarizer alone keeps). Two ways, each round on a fresh workdir, compress then ledger back
to back: ``alone`` (the ledger parses every result again) and ``shared`` (both inside
``previews.salvage.shared_parses()``: the ledger reuses the parses of the compression's
previews, as the engine will run it); the compression's CPU inside the block is shown
beside its CPU alone. Medians over ``--rounds``. Asserts nothing timed.

Run: ``.venv/bin/python bench/evidence_ledger.py [--rounds N] [--results N] [--scale N]``.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.corpus import ShapeThread, build_corpus  # noqa: E402
from bench.peers import _fresh_workdir  # noqa: E402
from yuxi_dash.agents import DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS  # noqa: E402
from yuxi_dash.compression import (  # noqa: E402
    CompressionOutcome,
    ExtractiveSummarizer,
    ThreadContextState,
    count_tokens,
    prepare_summary,
    write_summary,
)
from yuxi_dash.compression.compaction import tool_result_text  # noqa: E402
from yuxi_dash.compression.evidence_keep import KeptEvidence  # noqa: E402
from yuxi_dash.compression.evidence_ledger import Ledger, appears, build_ledger  # noqa: E402
from yuxi_dash.compression.previews.salvage import shared_parses  # noqa: E402
from yuxi_dash.files.workdir import Workdir  # noqa: E402

TARGET_COST = 0.10  # the ledger's CPU as a share of the compression's
CITED_PER_ANSWER = (1, 3)
T = TypeVar("T")


def with_citations(thread: ShapeThread, seed: int = 39) -> list[BaseMessage]:
    """The thread with a ``Sources:`` line on every answer, citing the leading evidence of
    the results read since the answer before."""
    rng = random.Random(f"{seed}:{thread.shape}")
    messages: list[BaseMessage] = []
    read: list[str] = []
    for message in thread.messages:
        if isinstance(message, ToolMessage):
            text = tool_result_text(message) or ""
            read.extend(key for key in thread.evidence if key not in read and appears(text, key))
        elif (
            isinstance(message, AIMessage) and isinstance(message.content, str) and message.content
        ):
            if read:
                cited = read[: rng.randint(*CITED_PER_ANSWER)]
                sources = ", ".join(key if "://" in key else f"[{key}]" for key in cited)
                content = f"{message.content}\nSources: {sources}"
                message = message.model_copy(update={"content": content})
            read = []
        messages.append(message)
    return messages


def compress(
    state: ThreadContextState,
    workdir: Workdir,
    budget: int = DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS,
) -> CompressionOutcome:
    prepared = prepare_summary(state, workdir=workdir, summarizer=ExtractiveSummarizer())
    return write_summary(prepared, workdir=workdir, summary_evidence_budget_tokens=budget)


def _cpu(run: Callable[[], T]) -> tuple[float, T]:
    """CPU seconds of one run (after a collection, so no run pays for another's garbage)."""
    gc.collect()
    started = time.process_time()
    result = run()
    return time.process_time() - started, result


@dataclass
class Row:
    shape: str
    before_tokens: int = 0
    after_tokens: int = 0
    ledger: Ledger | None = None  # the outcome's: the evidence index counted
    evidence: KeptEvidence | None = None
    unkept: Ledger | None = None  # the same compression with a budget of 0
    cpu: dict[str, list[float]] = field(default_factory=dict)  # compress / ledger, alone / shared

    def add(self, name: str, seconds: float) -> None:
        self.cpu.setdefault(name, []).append(seconds)

    def ms(self, name: str) -> float:
        return statistics.median(self.cpu[name]) * 1000

    def share(self, way: str) -> float:
        """Median over rounds of the ledger's CPU over the compression's, both run ``way``."""
        pairs = zip(self.cpu[f"ledger {way}"], self.cpu[f"compress {way}"], strict=True)
        return statistics.median(ledger / took for ledger, took in pairs)


def bench_thread(shape: str, messages: list[BaseMessage], base: Path, rounds: int) -> Row:
    state = ThreadContextState(f"bench-{shape}", messages)
    row = Row(shape)
    for _ in range(rounds):
        for way in ("alone", "shared"):
            workdir = _fresh_workdir(base)
            with shared_parses() if way == "shared" else nullcontext():
                took, outcome = _cpu(lambda: compress(state, workdir))  # noqa: B023
                written = [saved.path for _call, _tool, saved in outcome.saved_files]
                spent, _ledger = _cpu(
                    lambda: build_ledger(state, outcome.state, workdir, written=written)  # noqa: B023
                )
            row.add(f"compress {way}", took)
            row.add(f"ledger {way}", spent)
            row.before_tokens, row.after_tokens = outcome.before_tokens, outcome.after_tokens
            row.ledger, row.evidence = outcome.ledger, outcome.evidence
            shutil.rmtree(workdir.root.parent, ignore_errors=True)
    workdir = _fresh_workdir(base)
    row.unkept = compress(state, workdir, budget=0).ledger
    shutil.rmtree(workdir.root.parent, ignore_errors=True)
    return row


def _share(part: int, whole: int) -> str:
    return f"{part / whole:6.1%}" if whole else "     -"


HEADER = (
    f"{'shape':<18} {'tokens':>7} {'after':>5} {'items':>5} {'cited in view':>14} "
    f"{'visible':>7} {'recov.':>6} {'lost':>5} {'comp ms':>7} {'+shared':>7} "
    f"{'ledger ms':>9} {'shared':>6} {'ledger/comp':>11} {'shared':>6}"
)


def print_row(row: Row, mark: str = "") -> None:
    assert row.ledger is not None
    totals = row.ledger.state_counts()
    cited = row.ledger.state_counts(cited_only=True)
    items, cited_items = sum(totals.values()), sum(cited.values())
    print(
        f"{row.shape + mark:<18} {row.before_tokens:>7} {row.after_tokens:>5} {items:>5} "
        f"{cited['visible']:>3}/{cited_items:<3} {_share(cited['visible'], cited_items)} "
        f"{_share(totals['visible'], items):>7} {_share(totals['recoverable'], items)} "
        f"{_share(totals['lost'], items)} {row.ms('compress alone'):7.1f} "
        f"{row.ms('compress shared'):7.1f} {row.ms('ledger alone'):9.1f} "
        f"{row.ms('ledger shared'):6.1f} {row.share('alone'):11.1%} {row.share('shared'):6.1%}"
    )


def print_biggest(row: Row, messages: int, rounds: int) -> None:
    assert row.ledger is not None and row.evidence is not None and row.unkept is not None
    cited = row.ledger.state_counts(cited_only=True)
    totals = row.ledger.state_counts()
    n, c = sum(totals.values()), sum(cited.values())
    unkept = row.unkept.state_counts(cited_only=True)
    alone, shared = row.share("alone"), row.share("shared")
    print(
        f"\n* the biggest thread: {row.shape}, {messages} messages, {row.before_tokens} tokens "
        f"-> {row.after_tokens}, {row.ledger.summarized_messages} messages summarized "
        f"(CPU: medians of {rounds} rounds)\n"
        f"  cited share kept in view: {cited['visible']} of {c} "
        f"({_share(cited['visible'], c).strip()}; target >= 95%: "
        f"{'met' if c and cited['visible'] >= 0.95 * c else 'NOT met'})\n"
        f"  span evidence ({n} items): visible {_share(totals['visible'], n).strip()}, "
        f"recoverable {_share(totals['recoverable'], n).strip()}, "
        f"lost {_share(totals['lost'], n).strip()} "
        f"({totals['lost']} lost; target 0: {'met' if totals['lost'] == 0 else 'NOT met'})\n"
        f"  kept block: {row.evidence.block_tokens} tokens of a "
        f"{DEFAULT_SUMMARY_EVIDENCE_BUDGET_TOKENS}-token budget, {len(row.evidence.kept)} "
        f"cited or named items shown, {row.evidence.more} left to the index "
        f"({row.evidence.index_path})\n"
        f"  with a budget of 0 (the summarizer alone): cited in view "
        f"{unkept['visible']} of {c} ({_share(unkept['visible'], c).strip()})\n"
        f"  ledger CPU / compression CPU: alone {alone:.1%}, shared parses {shared:.1%} "
        f"(<= {TARGET_COST:.0%}: alone {'met' if alone <= TARGET_COST else 'NOT met'}, "
        f"shared {'met' if shared <= TARGET_COST else 'NOT met'})"
    )
    for kind, states in row.ledger.counts().items():
        print(f"  {kind:<13} " + "  ".join(f"{s} {k:>4}" for s, k in states.items()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--results", type=int, default=16, help="tool results per shape")
    parser.add_argument("--scale", type=int, default=1)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-ledger-"))
    try:
        corpus = build_corpus(results=args.results, scale=args.scale)
        threads = {t.shape: with_citations(t) for t in corpus}
        sizes = {shape: count_tokens(messages) for shape, messages in threads.items()}
        biggest = max(sizes, key=sizes.__getitem__)
        print(HEADER)
        rows = {}
        gc.collect()
        gc.freeze()  # the corpus out of the collector's walks, as bench/compaction.py does
        for shape in sorted(threads, key=lambda s: s == biggest):
            rows[shape] = bench_thread(shape, threads[shape], base, args.rounds)
            print_row(rows[shape], " *" if shape == biggest else "")
        gc.unfreeze()
        print_biggest(rows[biggest], len(threads[biggest]), args.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
