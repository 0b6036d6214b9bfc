"""The tuning lab's run over an agent's planned threads: `TuningRun`.

Planned by `tuning.plan.plan_tuning`, which writes the run's audit row as "pending".
`TuningRun.step` replays threads under both settings (`tuning.replay`), checking
``should_stop`` between threads, so a page can run it in slices and stop it; a thread the
replay refuses (a typed error) is counted by code under ``failed`` and the run goes on;
any other error completes the row as "failed" (Ctrl-C: "stopped") and is raised. With
workers, a stop or an error cancels the queued replays. `TuningRun.finish` sums the two
sides (`tuning.report`) and completes the row (completed or stopped).

Nothing is written but that row, and what a refused platform checkpoint writes as it is
read (`sources`: a quarantine row and its audit row). Dollars are added beside tokens when
model prices are configured (`costs.prices`), for input tokens only.
"""

from __future__ import annotations

import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace

from yuxi_dash.access.audit import complete_audit, record_audit
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.compression import ExtractiveSummarizer
from yuxi_dash.costs.prices import Price, load_prices
from yuxi_dash.errors import YuxiDashError
from yuxi_dash.settings import Settings
from yuxi_dash.tuning import sample as sampling
from yuxi_dash.tuning.recorded import ThreadRow, Unreadable, load_recorded
from yuxi_dash.tuning.replay import CompressionSettings, RecordedThread, ThreadReplay, replay_thread
from yuxi_dash.tuning.report import (
    ESTIMATE_NOTE,
    TuningResult,
    side_summary,
    thread_entry,
)

ACTION = "tuning.replay"  # the audit action of a replay (a look) and of a refused one
RUN_ROLE = Role.OPERATOR
MAX_SAMPLE = 1_000_000
MAX_WORKERS = 64
Progress = Callable[[int, int], None]  # (threads replayed, threads planned)
StopFlag = Callable[[], bool]
ESTIMATED_FIGURES = ("compressions", "offload_only_passes", "input_tokens_total")
PROPOSAL_FIELDS = ("summary_threshold", "summary_tool_result_token_limit", "summary_keep_messages")


@dataclass(frozen=True)
class Failed:
    """A thread that was read but that the replay refused (a typed error's code)."""

    thread_id: str
    code: str


@dataclass(frozen=True)
class _Pair:
    """One thread's two replays (not its messages: a run holds thousands)."""

    thread_id: str
    origin: str
    unrestored: int
    current: ThreadReplay
    proposed: ThreadReplay


def replay_pair(
    thread: RecordedThread,
    current: CompressionSettings,
    proposed: CompressionSettings,
    current_compresses: bool = True,
) -> _Pair | Failed:
    """The thread under both settings, or why it could not be (a worker process runs this)."""
    summarizer = ExtractiveSummarizer()
    try:
        return _Pair(
            thread.thread_id,
            thread.origin,
            thread.unrestored,
            replay_thread(thread, current, summarizer=summarizer, compress=current_compresses),
            replay_thread(thread, proposed, summarizer=summarizer),
        )
    except YuxiDashError as exc:
        return Failed(thread.thread_id, exc.code)


@dataclass
class TuningRun:
    """A planned replay of an agent's threads, stepped a thread at a time."""

    agent: str
    actor: Actor
    current_settings: CompressionSettings
    proposed_settings: CompressionSettings
    planned: list[ThreadRow]
    listed: int
    settings: Settings
    sample: int | None = None
    strata_sizes: dict[sampling.Stratum, int] = field(default_factory=dict)
    current_compresses: bool = True  # False: the agent has no compression middleware
    workers: int = 1
    audit_id: int | None = None  # the run's row, "pending" until it ends
    notes: list[str] = field(default_factory=list)  # said of the plan (the settings in force)
    pairs: list[_Pair] = field(default_factory=list)
    unreadable: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    stopped: bool = False
    finished: TuningResult | None = None
    ended: str | None = None  # the row's outcome once written
    error: str | None = None  # the code (or error type) that ended the run
    _threads: Iterator[RecordedThread | Unreadable] | None = None
    _seen: int = 0

    @property
    def total(self) -> int:
        return len(self.planned)

    @property
    def done(self) -> int:
        return self._seen

    @property
    def complete(self) -> bool:
        return self.stopped or self.error is not None or self._seen >= self.total

    def stop(self) -> None:
        """Stop before the next thread; `finish` then sums what was replayed."""
        self.stopped = True

    def step(
        self,
        max_threads: int | None = None,
        *,
        should_stop: StopFlag | None = None,
        on_progress: Progress | None = None,
    ) -> bool:
        """Replay up to ``max_threads`` more threads (all when None); True once complete.

        With ``workers`` > 1 the replays run in that many processes (threads are read
        here, in order). An error that is not a thread's own marks the row failed.
        """
        try:
            if self._threads is None:
                self._threads = load_recorded(self.planned, self.settings)
            if self.workers > 1:
                return self._step_in_pool(max_threads, should_stop, on_progress)
            replayed = 0
            while self._more(replayed, max_threads, should_stop):
                replayed += 1
                self._add(self._next(), on_progress)
            return self.complete
        except BaseException as exc:
            self.fail(exc)
            raise

    def fail(self, exc: BaseException) -> None:
        """Complete the run's row (once): failed when an error ended the run, stopped when
        it was interrupted (Ctrl-C)."""
        if isinstance(exc, KeyboardInterrupt):
            code, outcome = "interrupted", "stopped"
        else:
            code = exc.code if isinstance(exc, YuxiDashError) else type(exc).__name__
            outcome = "failed"
        if self.ended is None:
            self.error = code
        self._end(outcome, {"error": code, "threads_replayed": len(self.pairs)})

    def _more(self, replayed: int, most: int | None, should_stop: StopFlag | None) -> bool:
        """Whether to take another thread: not complete, under ``most``, not asked to stop."""
        if self.complete or (most is not None and replayed >= most):
            return False
        if should_stop is not None and should_stop():
            self.stop()
            return False
        return True

    def _next(self) -> RecordedThread | Unreadable:
        assert self._threads is not None
        thread = next(self._threads)
        self._seen += 1  # counted once read: a read that raises is not a thread seen
        return thread

    def _pair(self, thread: RecordedThread) -> _Pair | Failed:
        return replay_pair(
            thread, self.current_settings, self.proposed_settings, self.current_compresses
        )

    def _add(
        self, thread: RecordedThread | Unreadable | Failed | _Pair, on_progress: Progress | None
    ) -> None:
        if isinstance(thread, RecordedThread):
            thread = self._pair(thread)
        if isinstance(thread, Unreadable):
            self.unreadable[thread.code] = self.unreadable.get(thread.code, 0) + 1
        elif isinstance(thread, Failed):
            self.failed[thread.code] = self.failed.get(thread.code, 0) + 1
        else:
            self.pairs.append(thread)
        if on_progress is not None:
            left_out = sum(self.unreadable.values()) + sum(self.failed.values())
            on_progress(len(self.pairs) + left_out, self.total)

    def _step_in_pool(
        self, most: int | None, should_stop: StopFlag | None, on_progress: Progress | None
    ) -> bool:
        """Replay in worker processes; a stop or an error cancels what has not started."""
        context = multiprocessing.get_context("spawn")  # no fork of our pools and threads
        pending: deque[Future[_Pair | Failed] | Unreadable] = deque()
        replayed = 0
        pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)
        try:
            while True:
                while len(pending) < 2 * self.workers and self._more(replayed, most, should_stop):
                    replayed += 1
                    thread = self._next()
                    pending.append(
                        thread
                        if isinstance(thread, Unreadable)
                        else pool.submit(
                            replay_pair,
                            thread,
                            self.current_settings,
                            self.proposed_settings,
                            self.current_compresses,
                        )
                    )
                if self.stopped:
                    self._cancel(pending)
                if not pending:
                    break
                item = pending.popleft()
                self._add(item if isinstance(item, Unreadable) else item.result(), on_progress)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return self.complete

    def _cancel(self, pending: deque[Future[_Pair | Failed] | Unreadable]) -> None:
        """Drop the queued replays that have not started (they are not seen after all)."""
        for item in list(pending):
            if isinstance(item, Future) and item.cancel():
                pending.remove(item)
                self._seen -= 1

    def finish(self) -> TuningResult:
        """The result of what was replayed, and the run's one audit row (written once)."""
        if self.finished is not None:
            return self.finished
        sides = [
            side_summary(settings, [getattr(pair, name) for pair in self.pairs])
            for name, settings in (
                ("current", self.current_settings),
                ("proposed", self.proposed_settings),
            )
        ]
        price, priced = self._price()
        notes = [*self.notes, *priced]
        if price is not None:
            sides = [
                replace(side, cost_usd=price.cost(side.input_tokens_total, 0)) for side in sides
            ]
        if any(side.estimated for side in sides):
            notes.insert(0, ESTIMATE_NOTE)
        if self.sample is not None:
            sides = [
                replace(side, fleet_estimate=self._estimates(name))
                for side, name in zip(sides, ("current", "proposed"), strict=True)
            ]
        result = TuningResult(
            agent=self.agent,
            current=sides[0],
            proposed=sides[1],
            threads=[
                thread_entry(p.thread_id, p.origin, p.current, p.proposed) for p in self.pairs
            ],
            threads_listed=self.listed,
            threads_planned=self.total,
            sample=self.sample,
            stopped=self.stopped and self._seen < self.total,
            unreadable=dict(self.unreadable),
            failed=dict(self.failed),
            unrestored=sum(pair.unrestored for pair in self.pairs),
            notes=notes,
        )
        self.finished = result
        self._end(
            "stopped" if result.stopped else "completed",
            {
                "threads_replayed": len(self.pairs),
                "threads_unreadable": sum(self.unreadable.values()),
                "threads_failed": sum(self.failed.values()),
            },
        )
        return result

    def _end(self, outcome: str, detail: dict[str, object]) -> None:
        """Complete the run's "pending" row (once; a row that is gone is written anew)."""
        if self.ended is not None:
            return
        self.ended = outcome
        if self.audit_id is not None and complete_audit(
            self.audit_id, outcome=outcome, detail=detail, settings=self.settings
        ):
            return
        record_audit(
            actor=self.actor.id,
            action=ACTION,
            target=f"agent:{self.agent}",
            outcome=outcome,
            detail={**self.plan_detail(), **detail},
            settings=self.settings,
        )

    def plan_detail(self) -> dict[str, object]:
        """What the row says of the plan: threads, sample, workers and the proposal."""
        proposal = (
            self.proposed_settings.summary_threshold_k,
            self.proposed_settings.tool_result_token_limit,
            self.proposed_settings.keep_messages,
        )
        return {
            "threads_planned": self.total,
            "sample": self.sample,
            "workers": self.workers,
            "proposed": dict(zip(PROPOSAL_FIELDS, proposal, strict=True)),
        }

    def _price(self) -> tuple[Price | None, list[str]]:
        """The agent's price when prices are configured, and the notes that say what it is."""
        try:
            prices = load_prices(self.settings)
        except YuxiDashError as exc:
            return None, [f"no dollars: the prices file could not be read ({exc.code})"]
        if prices is None:
            return None, []
        price = prices.price_for(None, self.agent)
        if price is None:
            return None, [f"no dollars: the prices file lists no price for agent {self.agent}"]
        return price, [
            "dollars are input tokens only: a replay does not change what the model answers"
        ]

    def _estimates(self, side: str) -> dict[str, sampling.Estimate]:
        """The fleet totals the sample estimates, with their 95% intervals."""
        strata = {
            row.thread_id: sampling.stratum(row.pressure_ratio, row.model_calls)
            for row in self.planned
        }
        found: dict[str, sampling.Estimate] = {}
        for figure in ESTIMATED_FIGURES:
            values: dict[sampling.Stratum, list[float]] = {}
            for pair in self.pairs:
                values.setdefault(strata[pair.thread_id], []).append(
                    _figure(getattr(pair, side), figure)
                )
            found[figure] = sampling.estimate(self.strata_sizes, values)
        return found


def _figure(replay: ThreadReplay, figure: str) -> float:
    if figure == "compressions":
        return float(len(replay.compression_turns))
    if figure == "offload_only_passes":
        return float(len(replay.offload_turns))
    return float(sum(replay.input_tokens))
