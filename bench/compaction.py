"""Compaction bench: our engine beside its floor and its peers, on every corpus shape.

For each shape of ``bench/corpus.py`` (1× and 3× sizes), round-robin in one
process on the same messages, each run into a fresh directory:

- ``floor``: sha256 + ``json.loads`` of every tool result over the limit (the
  work any offloader that reads structure must do);
- ``floor+writes``: the floor plus writing each result's bytes to its own new
  file (``os.open(O_CREAT|O_EXCL)``, write, close) in a ready directory (every
  engine starts with its output directory in place, as in use);
- ``floor+atomic``: the floor plus each file published whole, as our ``Workdir``
  does (written unnamed, then linked under its name: no reader ever sees a
  partial file); the part of ours' cost that is that guarantee, for reference;
- ``ours``: ``compact_messages`` (offload with previews into a ``Workdir``, plus
  the ``write_file``/``edit_file`` argument truncation at 2000); the ``Workdir`` is
  built before the clock starts, as deepagents' middleware is below (a running
  agent holds both);
- ``deepagents``: ``FilesystemMiddleware(tool_token_limit_before_evict=300)`` on
  a ``FilesystemBackend`` evicting every tool result (its own
  ``_intercept_large_tool_result``, what its ``wrap_tool_call`` runs on each
  result), then ``SummarizationMiddleware._truncate_args`` at 2000 over all
  messages;
- ``trim``: langchain-core's ``trim_messages`` (strategy "last") to the token
  count of our engine's view of the same thread.

Printed first, per shape and overall: what the previews let a model cite
(``peers.citations``): the share of query_kb records citable from the previews (id
with its source or filename and chunk_index), in all results and in results of
12-22 records, the share of shown records that are whole, the body characters of
the leading records, and the share of ids visible; ours beside ``yuxi-plain``, the
modelled system's record rule (``bench/plain_rule.py``, quality only). Then per
shape and engine: wall and CPU ms (medians over ``--rounds``
rounds), the median per-round ratio to ``floor+writes`` by CPU time and by wall
time (CPU time is what a run costs when other processes share the cores; file
creation shows up as system time), the share of evidence ids (record ids, urls)
visible whole in the view, what is recoverable (byte for byte from the file, or
kept whole in the view) and the view's size; then the minimum visible share over
shapes and the totals per engine. Engine order rotates every round. Each run starts
after a collection, with the corpus frozen out of the collector's reach (``--cold``:
not frozen, so each run starts right after a walk over the whole corpus). ``--profile``
adds where our engine's CPU time goes, beside the same parts of the floor.
Asserts nothing timed.

Run: ``.venv/bin/python bench/compaction.py [--rounds N] [--results N] [--profile]``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import hashlib
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

sys.path.append(str(Path(__file__).resolve().parent.parent))

from bench.corpus import SHAPES, ShapeThread, build_corpus  # noqa: E402
from bench.peers import (  # noqa: E402
    Citations,
    Deepagents,
    Quality,
    _fresh_dir,
    _fresh_workdir,
    _large_texts,
    quality,
    run_floor,
    run_floor_atomic,
    run_floor_writes,
    run_ours,
    run_trim,
)
from yuxi_dash.files.workdir import Workdir  # noqa: E402

TARGET_CITABLE = 0.30  # of kb records, in results of 12-22 records
TARGET_VS_DEEPAGENTS = 1.10
ENGINES = ("floor", "floor+writes", "floor+atomic", "ours", "deepagents", "trim")


# -- timing ---------------------------------------------------------------------------
Clock = tuple[float, float]  # (wall seconds, CPU seconds of this process)


def _timed(run: Callable[[], Any]) -> Clock:
    """Wall and CPU time of one run. CPU time (user + system, so the syscalls of the file
    writes count) is what a run costs when other processes share the cores.

    A collection first, so that no engine pays for another's garbage; it walks only
    what is not frozen (see ``_frozen``)."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_round(
    thread: ShapeThread, base: Path, trim_tokens: int, order: list[str]
) -> dict[str, Clock]:
    """One timing of every engine on one thread, in ``order``, each into a fresh directory."""
    times: dict[str, Clock] = {}
    messages = thread.messages
    for name in order:
        holder = _fresh_dir(base)
        if name == "floor":
            times[name] = _timed(lambda: run_floor(messages, base))
        elif name == "floor+writes":
            times[name] = _timed(functools.partial(run_floor_writes, messages, holder))
        elif name == "floor+atomic":
            times[name] = _timed(functools.partial(run_floor_atomic, messages, holder))
        elif name == "ours":
            workdir = Workdir(holder / "workdir")
            workdir.initialize()
            workdir.ensure_writable()  # the output directories exist, as in use
            times[name] = _timed(lambda: run_ours(messages, workdir))  # noqa: B023
        elif name == "deepagents":
            (holder / "large_tool_results").mkdir()  # its output directory exists, as in use
            engine = Deepagents.build(holder)
            times[name] = _timed(lambda: engine.run(messages))  # noqa: B023
        else:
            times[name] = _timed(lambda: run_trim(messages, trim_tokens))
        shutil.rmtree(holder, ignore_errors=True)
    return times


@contextmanager
def _frozen(cold: bool) -> Iterator[None]:
    """The corpus (built just before) out of the collector's reach while it is timed.

    The collection before each run (``_timed``) then walks what the last engine left,
    not the whole corpus: a running agent's compaction does not start right after a
    walk over its whole heap. ``cold`` keeps that walk, to compare. (Measured here:
    with two engines alternating, ours/floor+writes at 1x was 1.23 with the walk and
    1.13 without; with every engine in the rotation, 1.25 and 1.26: the engines in
    between refill the caches anyway.)
    """
    gc.collect()
    if not cold:
        gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _floor_all(threads: list[ShapeThread], base: Path) -> None:
    for thread in threads:
        run_floor(thread.messages, base)


def _fs_type(path: Path) -> str:
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return "unknown"
    best, kind = "", "unknown"
    resolved = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) >= 3 and (resolved + "/").startswith(fields[1].rstrip("/") + "/"):
            if len(fields[1]) >= len(best):
                best, kind = fields[1], fields[2]
    return kind


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def bench_scale(threads: list[ShapeThread], base: Path, rounds: int) -> dict[str, Any]:
    """Quality once, then ``rounds`` round-robin timings; prints the table of one scale."""
    trim_tokens: dict[str, int] = {}
    qualities: dict[str, dict[str, Quality]] = {}
    for thread in threads:
        view = run_ours(thread.messages, _fresh_workdir(base))
        trim_tokens[thread.shape] = count_tokens_approximately(view)
        qualities[thread.shape] = quality(thread, base, trim_tokens[thread.shape])
    times: dict[str, dict[str, list[Clock]]] = {
        t.shape: {name: [] for name in ENGINES} for t in threads
    }
    for round_index in range(rounds):
        shift = round_index % len(ENGINES)
        order = list(ENGINES[shift:] + ENGINES[:shift])
        for thread in threads:
            for name, took in time_round(thread, base, trim_tokens[thread.shape], order).items():
                times[thread.shape][name].append(took)
    totals: dict[str, list[Clock]] = {}
    for name in ENGINES:
        totals[name] = [
            (
                sum(times[t.shape][name][index][0] for t in threads),
                sum(times[t.shape][name][index][1] for t in threads),
            )
            for index in range(rounds)
        ]

    print_citations(threads, qualities)

    def ms(series: list[Clock], clock: int) -> float:
        return statistics.median(took[clock] for took in series) * 1000

    def ratio(series: list[Clock], floor: list[Clock], clock: int) -> float:
        """Median over rounds of the ratio within a round (both ran back to back)."""
        return statistics.median(
            a[clock] / b[clock] if b[clock] else float("nan")
            for a, b in zip(series, floor, strict=True)
        )

    print(
        f"{'shape':<17} {'engine':<13} {'wall ms':>8} {'cpu ms':>8} {'x f+w cpu':>9} "
        f"{'x f+w wall':>10} {'visible':>8} {'view chars':>10}  recoverable"
    )
    for thread in threads:
        shape_times = times[thread.shape]
        floor_writes = shape_times["floor+writes"]
        for name in ENGINES:
            q = qualities[thread.shape][name]
            shown = "" if q.visible != q.visible else f"{q.visible:8.1%}"
            series = shape_times[name]
            print(
                f"{thread.shape:<17} {name:<13} {ms(series, 0):8.2f} {ms(series, 1):8.2f} "
                f"{ratio(series, floor_writes, 1):9.2f} {ratio(series, floor_writes, 0):10.2f} "
                f"{shown:>8} {q.view_chars if q.recoverable != '-' else '':>10}  {q.recoverable}"
            )
    print()
    minimum = {
        name: min(qualities[t.shape][name].visible for t in threads)
        for name in ("ours", "yuxi-plain", "deepagents", "trim")
    }
    worst = {
        name: min(threads, key=lambda t: qualities[t.shape][name].visible).shape  # noqa: B023
        for name in minimum
    }
    structured = [t for t in threads if t.shape != "broken_json"]
    print("minimum visible share over shapes (all shapes | without broken_json):")
    for name, value in minimum.items():
        without = min(qualities[t.shape][name].visible for t in structured)
        print(f"  {name:<11} {value:6.1%} ({worst[name]}) | {without:6.1%}")
    print("all shapes together (per round: the sum over shapes; median over rounds):")
    for name in ENGINES:
        series = totals[name]
        print(
            f"  {name:<13} wall {ms(series, 0):8.1f} ms  cpu {ms(series, 1):8.1f} ms  "
            f"x floor+writes: cpu {ratio(series, totals['floor+writes'], 1):5.2f} "
            f"wall {ratio(series, totals['floor+writes'], 0):5.2f}  "
            f"x floor: cpu {ratio(series, totals['floor'], 1):5.2f}"
        )
    for clock, label in ((1, "cpu"), (0, "wall")):
        ours_ratio = ratio(totals["ours"], totals["floor+writes"], clock)
        vs_deep = ratio(totals["ours"], totals["deepagents"], clock)
        vs_atomic = ratio(totals["ours"], totals["floor+atomic"], clock)
        met = "met" if vs_deep <= TARGET_VS_DEEPAGENTS else "NOT met"
        print(
            f"  cost ({label}): ours/deepagents {vs_deep:.2f}x "
            f"(<= {TARGET_VS_DEEPAGENTS}x: {met}); ours/floor+writes {ours_ratio:.2f}x; "
            f"ours/floor+atomic {vs_atomic:.2f}x"
        )
    return {"times": times, "totals": totals, "qualities": qualities}


def _share(part: int, whole: int) -> str:
    return f"{part / whole:6.1%}" if whole else "     -"


def print_citations(threads: list[ShapeThread], qualities: dict[str, dict[str, Quality]]) -> None:
    """What the previews let a model cite, per shape and overall, ours beside yuxi-plain."""
    print(
        f"{'shape':<17} {'rule':<10} {'kb recs':>7} {'citable':>7} {'12-22':>7} {'whole':>7} "
        f"{'lead body min/mean':>18} {'ids vis':>7}"
    )
    totals = {name: Citations() for name in ("ours", "yuxi-plain")}
    for thread in threads:
        for name, total in totals.items():
            quality = qualities[thread.shape][name]
            c = quality.cites or Citations()
            total.add(c)
            lead = (
                f"{min(c.lead_bodies)}/{statistics.mean(c.lead_bodies):.0f}"
                if c.lead_bodies
                else "-"
            )
            print(
                f"{thread.shape:<17} {name:<10} {c.kb_records:>7} {_share(c.citable, c.kb_records)} "
                f"{_share(c.citable_12_22, c.kb_records_12_22)} {_share(c.whole, c.shown)} "
                f"{lead:>18} {quality.visible:7.1%}"
            )
    for name, c in totals.items():
        lead = (
            f"{min(c.lead_bodies)}/{statistics.mean(c.lead_bodies):.0f}" if c.lead_bodies else "-"
        )
        print(
            f"{'all shapes':<17} {name:<10} {c.kb_records:>7} {_share(c.citable, c.kb_records)} "
            f"{_share(c.citable_12_22, c.kb_records_12_22)} {_share(c.whole, c.shown)} {lead:>18}"
        )
    ours = totals["ours"]
    citable = ours.citable_12_22 / max(1, ours.kb_records_12_22)
    print(
        f"  targets: ours citable in results of 12-22 records {citable:.1%} "
        f"(>= {TARGET_CITABLE:.0%}: {'met' if citable >= TARGET_CITABLE else 'NOT met'}); "
        f"every shown record whole: {'met' if ours.whole == ours.shown else 'NOT met'} "
        f"({ours.whole}/{ours.shown})\n"
    )


def breakdown(threads: list[ShapeThread], base: Path, rounds: int) -> None:
    """Where our engine's CPU time goes, beside the same parts of ``floor+writes``.

    Each part is a wrapped call timed with the process CPU clock (a profiler's own
    overhead would inflate the Python parts); per part, the best of ``rounds`` runs.
    """
    import ast

    import yuxi_dash.compression.compaction as compaction
    import yuxi_dash.compression.previews.preview as preview
    import yuxi_dash.compression.previews.salvage as salvage

    spent: dict[str, float] = {}

    def wrap(owner: Any, name: str, label: str) -> Callable[[], None]:
        real = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return real(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.process_time() - started

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, real)

    parts: list[tuple[Any, str, str]] = [  # (owner, attribute, label), in print order
        (Workdir, "prepare_tool_result", "encode + sha256"),
        (Workdir, "write_prepared", "file write (Workdir.write_prepared)"),
        (compaction, "tool_result_preview", "preview, all"),
        (salvage, "_decode", "  of which JSON decoding (json)"),
        (ast, "literal_eval", "  of which Python reprs (salvage)"),
        (preview, "fit_records", "  of which fitting the records (and their bodies)"),
        (compaction, "saved_result_header", "saved-result header"),
        (ToolMessage, "model_copy", "message copy"),
        (compaction, "truncate_tool_args", "argument truncation"),
    ]
    best: dict[str, float] = {}
    for _ in range(rounds):
        workdirs = [_fresh_workdir(base) for _ in threads]
        spent.clear()
        undo = [wrap(owner, name, label) for owner, name, label in parts]
        gc.collect()
        started = time.process_time()
        try:
            for thread, workdir in zip(threads, workdirs, strict=True):
                run_ours(thread.messages, workdir)
        finally:
            for restore in reversed(undo):
                restore()
        spent["total"] = time.process_time() - started
        top_level = [k for k in spent if k != "total" and not k.startswith("  ")]
        spent["rest (loop, result texts, lists)"] = spent["total"] - sum(
            spent[k] for k in top_level
        )
        for label, took in spent.items():
            best[label] = min(best.get(label, took), took)
    texts = [t for thread in threads for t in _large_texts(thread.messages)]
    floor_parts: dict[str, float] = {}
    for _ in range(rounds):
        root = _fresh_dir(base)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        started = time.process_time()
        datas = [(t.encode("utf-8", "surrogatepass"), t) for t in texts]
        digests = [hashlib.sha256(data).hexdigest() for data, _t in datas]
        hashed = time.process_time()
        for _data, text in datas:
            if text[:1] in "{[":
                try:
                    json.loads(text)
                except ValueError:
                    pass
        parsed = time.process_time()
        for (data, _text), digest in zip(datas, digests, strict=True):
            try:
                fd = os.open(root / f"{digest[:16]}.txt", flags, 0o644)
            except FileExistsError:
                continue  # the same result twice: one file
            os.write(fd, data)
            os.close(fd)
        written = time.process_time()
        for label, took in (
            ("encode + sha256", hashed - started),
            ("json.loads", parsed - hashed),
            ("file write (os.open, write, close)", written - parsed),
        ):
            floor_parts[label] = min(floor_parts.get(label, took), took)
    print(f"\nwhere the CPU time goes ({len(texts)} results over the limit; best of {rounds}):")
    order = [label for _owner, _name, label in parts]
    order += ["rest (loop, result texts, lists)", "total"]
    for label in order:
        print(f"  ours   {label:<50} {best.get(label, 0.0) * 1000:8.1f} ms")
    for label, took in floor_parts.items():
        print(f"  floor  {label:<50} {took * 1000:8.1f} ms")


def run_scale(threads: list[ShapeThread], base: Path, scale: int, rounds: int) -> None:
    """The header line and the table of one scale."""
    size = sum(len(t) for th in threads for t in _large_texts(th.messages))
    evidence = sum(len(th.evidence) for th in threads)
    floor = min(_timed(functools.partial(_floor_all, threads, base))[1] for _ in range(5))
    print(
        f"\n== {scale}x: {sum(len(t.messages) for t in threads)} messages, "
        f"{sum(len(t.results) for t in threads)} tool results, {size / 1e6:.2f} M chars "
        f"over the limit, {evidence} evidence ids; machine floor "
        f"{floor * 1000:.1f} ms cpu ({size / 1e6 / floor:.0f} M chars/s) =="
    )
    bench_scale(threads, base, rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--results", type=int, default=16, help="tool results per shape at 1x")
    parser.add_argument("--scales", default="1,3")
    parser.add_argument("--dir", default=None, help="where the temp dirs go (default: system temp)")
    parser.add_argument(
        "--profile", action="store_true", help="where ours spends its CPU time, on the last scale"
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="collect over the whole corpus before every timed run (the old way; see _frozen)",
    )
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="bench-compaction-", dir=args.dir))
    print(
        f"machine: {_cpu()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}, "
        f"python {platform.python_version()}, temp dirs on {_fs_type(base)} ({base})"
    )
    print(
        f"shapes: {', '.join(SHAPES)}; {args.rounds} rounds, median; "
        f"corpus {'collected before every run (--cold)' if args.cold else 'frozen while timed'}"
    )
    threads: list[ShapeThread] = []
    try:
        for scale in (int(s) for s in args.scales.split(",")):
            threads = build_corpus(results=args.results, scale=scale)
            with _frozen(args.cold):
                run_scale(threads, base, scale, args.rounds)
        if args.profile:
            breakdown(threads, base, args.rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
