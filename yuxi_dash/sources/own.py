"""Our own thread as a `ThreadSource`: state in our checkpointer, compressed by our core.

The compress is `service.compress_own_thread` (three phases under our row lock; the
protocol is in docs/architecture.md, "A compress click"), the preview
`service.preview_own_thread`. An unknown or invalid thread id resolves here too, so the
service's own refusal (404, invalid_input) is the one the caller sees, audited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from yuxi_dash.access.roles import Actor
from yuxi_dash.compression import Summarizer
from yuxi_dash.service.compress import CompressResult, StepHook, compress_own_thread
from yuxi_dash.service.compress_preview import CompressionPreview, preview_own_thread
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.origin import ROUTE_HERE
from yuxi_dash.store.thread_store import state_store


@dataclass(frozen=True)
class OwnSource:
    """A thread this dashboard's platform runs: its state and lock are ours."""

    thread_id: str
    settings: Settings
    route: str = ROUTE_HERE
    calls_out: bool = False

    def label(self, platform: str | None = None) -> str:
        return "ours"

    def state_store(self) -> CheckpointStore:
        return state_store(self.settings)

    def preview(
        self, *, user_id: str | None = None, summarizer: Summarizer | None = None
    ) -> CompressionPreview:
        return preview_own_thread(
            self.thread_id, self.settings, user_id=user_id, summarizer=summarizer
        )

    def compress(
        self,
        *,
        actor: Actor,
        expected_checkpoint_id: str | None = None,
        user_id: str | None = None,
        summarizer: Summarizer | None = None,
        on_step: StepHook | None = None,
        caller_ids: Mapping[str, str] | None = None,
        ask_platform: bool = True,
    ) -> CompressResult:
        return compress_own_thread(
            self.thread_id,
            actor=actor,
            expected_checkpoint_id=expected_checkpoint_id,
            user_id=user_id,
            settings=self.settings,
            summarizer=summarizer,
            on_step=on_step,
            caller_ids=caller_ids,
        )
