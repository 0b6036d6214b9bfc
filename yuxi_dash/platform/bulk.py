"""Several threads compressed through the one seam: at most 3 platform calls in flight.

`compress_each(items, actor=...)` runs `service.compress_thread_context` for
each (thread id, checkpoint the operator saw). The attached platform's threads
(when ``YUXI_DASH_PLATFORM_URL`` is set) go out `PLATFORM_CALLS` at a time; our
own threads run one after another beside them (each takes our row lock). Each
thread ends as one `Outcome`, its result or its error, in the order given;
``on_done`` is called in the caller's thread as each one ends (a page draws its
line there). An attached thread the platform refused before (`capability`) is refused
here without a call, unless ``ask_platform`` (the CLI's ``--ask-platform``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass

import sqlalchemy as sa

from yuxi_dash.access.roles import Actor
from yuxi_dash.platform.capability import refuse_remembered
from yuxi_dash.service.compress import CompressResult, compress_thread_context
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ORIGIN_ATTACHED, Conversation

PLATFORM_CALLS = 3  # compress calls in flight to the platform at once


@dataclass(frozen=True)
class Outcome:
    """One thread of a bulk compress: its result, or the error it ended with."""

    thread_id: str
    result: CompressResult | None = None
    error: BaseException | None = None
    seconds: float = 0.0  # the whole compress as this process saw it


def _attached(settings: Settings, thread_ids: Sequence[str]) -> set[str]:
    if not settings.platform_configured or not thread_ids:
        return set()
    with session_scope(settings) as session:
        return set(
            session.scalars(
                sa.select(Conversation.thread_id).where(
                    Conversation.thread_id.in_(list(thread_ids)),
                    Conversation.origin == ORIGIN_ATTACHED,
                )
            )
        )


def _one(
    thread_id: str,
    checkpoint_id: str | None,
    actor: Actor,
    settings: Settings,
    remembered: bool,
) -> Outcome:
    started = time.perf_counter()
    try:
        if remembered:
            refuse_remembered(thread_id, actor=actor, settings=settings)
        result = compress_thread_context(
            thread_id, actor=actor, expected_checkpoint_id=checkpoint_id, settings=settings
        )
    except Exception as exc:  # noqa: BLE001 - each thread's error is its own line
        return Outcome(thread_id, error=exc, seconds=time.perf_counter() - started)
    return Outcome(thread_id, result=result, seconds=time.perf_counter() - started)


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
    attached = _attached(settings, [thread_id for thread_id, _ in items])
    outcomes: list[Outcome | None] = [None] * len(items)
    with (
        ThreadPoolExecutor(PLATFORM_CALLS, thread_name_prefix="yuxi-dash-platform") as remote,
        ThreadPoolExecutor(1, thread_name_prefix="yuxi-dash-compress") as local,
    ):
        futures: dict[Future[Outcome], int] = {}
        for index, (thread_id, checkpoint_id) in enumerate(items):
            remote_one = thread_id in attached
            pool = remote if remote_one else local
            check = remote_one and not ask_platform
            futures[pool.submit(_one, thread_id, checkpoint_id, actor, settings, check)] = index
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[futures[future]] = outcome
            if on_done is not None:
                on_done(outcome)
    return [outcome for outcome in outcomes if outcome is not None]
