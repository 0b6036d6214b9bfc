"""The demo's story time: days of conversations played in seconds, each at its own hour.

Owns `StoryClock`, the clock a demo thread's agent runs with (it is the
token-usage middleware's `clock`, so each model call's `measured_at` in the
checkpoint, and the usage snapshot projected from it, is story time). A
thread's turns are minutes to hours apart, its model calls seconds apart, and
the clock never passes the thread's `end` (each step takes at most a quarter
of the time left), so a thread that plays longer than planned squeezes its
last steps together instead of running into the future. A thread that plays
fewer turns than planned goes quiet before its `end`, unless the seeder lets
time pass (`skip_to`) before a turn it knows is the last one.

`story_clock(plan, anchor)` is a thread's clock; its `now` is when the thread's first
message was written. `OffloadClock` (agent middleware) notes the story time at which each tool
result was offloaded, for the tool-results index.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import ToolMessage

from yuxi_dash.compression import parse_saved_result
from yuxi_dash.compression.middleware import Handler
from yuxi_dash.demo.plan import ThreadPlan
from yuxi_dash.sim.topics import stable_rng


class StoryClock:
    """Story time of one demo thread, from `start`, never past `end`."""

    def __init__(self, rng: random.Random, start: datetime, end: datetime) -> None:
        self.rng = rng
        self.now = start
        self.end = end
        self.turns: list[datetime] = []  # when each user message arrived
        self.calls: list[datetime] = []  # when each model call was measured, in order

    def _advance(self, gap: timedelta) -> datetime:
        self.now += min(gap, max(self.end - self.now, timedelta()) / 4)
        return self.now

    def skip_to(self, at: datetime) -> None:
        """Let time pass up to ``at`` (never backwards, never past `end`)."""
        self.now = max(self.now, min(at, self.end))

    def turn(self) -> datetime:
        """A new user message: minutes to hours after the last step (the first one at `start`)."""
        if self.turns or self.calls:
            self._advance(timedelta(minutes=self.rng.randint(3, 240)))
        self.turns.append(self.now)
        return self.now

    def __call__(self) -> datetime:
        """A model call: seconds after the last step."""
        self.calls.append(self._advance(timedelta(seconds=self.rng.randint(2, 45))))
        return self.now


class OffloadClock(AgentMiddleware[Any, Any, Any]):
    """When each tool result was offloaded, in story time: the model call that first sent it saved.

    It sits inside the compression middleware (it sees what the model is sent)
    and outside the token-usage middleware (whose clock call is that model call's time).
    """

    def __init__(self, clock: StoryClock) -> None:
        super().__init__()
        self.clock = clock
        self.saved: dict[str, datetime] = {}  # path -> story time of the call
        self._seen: set[str | None] = set()  # ids of tool messages already seen saved

    def wrap_model_call(self, request: ModelRequest[Any], handler: Handler) -> ModelResponse[Any]:
        response = handler(request)
        at = self.clock.calls[-1] if self.clock.calls else self.clock.now
        for message in request.messages:
            if not isinstance(message, ToolMessage) or message.id in self._seen:
                continue
            saved = parse_saved_result(message.content)
            if saved is not None and saved.path:
                self._seen.add(message.id)
                self.saved.setdefault(saved.path, at)
        return response


def story_clock(plan: ThreadPlan, anchor: datetime) -> StoryClock:
    """The thread's story time: it goes quiet no later than ``anchor - plan.recency``."""
    rng = stable_rng("demo", plan.thread_id, "clock")
    end = anchor - plan.recency
    turns = max(plan.min_turns, 3) + 2  # roughly how many turns it will play
    span = sum((timedelta(minutes=rng.randint(3, 240)) for _ in range(turns)), timedelta())
    return StoryClock(rng, end - span, end)
