"""The compress entry points every caller uses: one thread, its preview, or several.

`compress_thread_context` and `preview_compression` resolve the thread's source once
(`sources.resolver`) and ask it; they hold no rule of their own. `compress_each` runs a
list: the attached platform's threads go out `PLATFORM_CALLS` at a time, our own run
one after another beside them (each takes our row lock). Each thread ends as one
`Outcome`, its result or its error, in the order given; ``on_done`` is called in the
caller's thread as each ends (a page draws its line there). What the platform refused
before is refused without a call unless ``ask_platform`` (the CLI's ``--ask-platform``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from yuxi_dash.access.roles import Actor
from yuxi_dash.compression import Summarizer
from yuxi_dash.service.compress import CompressResult, StepHook
from yuxi_dash.service.compress_preview import CompressionPreview
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sources.base import ThreadSource
from yuxi_dash.sources.resolver import thread_source, thread_sources

PLATFORM_CALLS = 3  # compress calls in flight to the platform at once


def compress_thread_context(
    thread_id: str,
    *,
    actor: Actor,
    expected_checkpoint_id: str | None = None,
    user_id: str | None = None,
    settings: Settings | None = None,
    summarizer: Summarizer | None = None,
    on_step: StepHook | None = None,
    caller_ids: Mapping[str, str] | None = None,
    ask_platform: bool = True,
) -> CompressResult:
    """Compress one thread now, where its source compresses it (audited there).

    `user_id`: a thread of another user is 404. `expected_checkpoint_id`: the checkpoint
    the operator saw (another newest is 409 stale_state). `on_step`: our core's phase-3
    steps (a seam for tests). `caller_ids`: the API caller's ids, into the audit rows.
    ``ask_platform`` False: what the platform refused before is refused without a call.
    """
    return thread_source(thread_id, settings).compress(
        actor=actor,
        expected_checkpoint_id=expected_checkpoint_id,
        user_id=user_id,
        summarizer=summarizer,
        on_step=on_step,
        caller_ids=caller_ids,
        ask_platform=ask_platform,
    )


def preview_compression(
    thread_id: str,
    settings: Settings | None = None,
    *,
    user_id: str | None = None,
    summarizer: Summarizer | None = None,
) -> CompressionPreview:
    """What a compress would do now, read-only (the compress dialog's preview)."""
    return thread_source(thread_id, settings).preview(user_id=user_id, summarizer=summarizer)


@dataclass(frozen=True)
class Outcome:
    """One thread of a bulk compress: its result, or the error it ended with."""

    thread_id: str
    result: CompressResult | None = None
    error: BaseException | None = None
    seconds: float = 0.0  # the whole compress as this process saw it


def _one(
    source: ThreadSource, checkpoint_id: str | None, actor: Actor, ask_platform: bool
) -> Outcome:
    started = time.perf_counter()
    try:
        result = source.compress(
            actor=actor, expected_checkpoint_id=checkpoint_id, ask_platform=ask_platform
        )
    except Exception as exc:  # noqa: BLE001 - each thread's error is its own line
        return Outcome(source.thread_id, error=exc, seconds=time.perf_counter() - started)
    return Outcome(source.thread_id, result=result, seconds=time.perf_counter() - started)


def compress_each(
    items: Sequence[tuple[str, str | None]],
    *,
    actor: Actor,
    settings: Settings | None = None,
    on_done: Callable[[Outcome], None] | None = None,
    ask_platform: bool = False,
) -> list[Outcome]:
    """Compress each (thread id, expected checkpoint id); one outcome per item, in order.

    ``ask_platform``: send an attached thread even when the platform refused it before.
    """
    settings = settings or get_settings()
    sources = thread_sources([thread_id for thread_id, _ in items], settings)
    outcomes: list[Outcome | None] = [None] * len(items)
    with (
        ThreadPoolExecutor(PLATFORM_CALLS, thread_name_prefix="yuxi-dash-platform") as remote,
        ThreadPoolExecutor(1, thread_name_prefix="yuxi-dash-compress") as local,
    ):
        futures: dict[Future[Outcome], int] = {}
        for index, (thread_id, checkpoint_id) in enumerate(items):
            source = sources[thread_id]
            pool = remote if source.calls_out else local
            futures[pool.submit(_one, source, checkpoint_id, actor, ask_platform)] = index
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[futures[future]] = outcome
            if on_done is not None:
                on_done(outcome)
    return [outcome for outcome in outcomes if outcome is not None]
