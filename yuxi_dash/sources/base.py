"""The thread source interface: what every caller asks of one thread, whoever owns it.

A `ThreadSource` is resolved once per thread id (`sources.resolver`) and handed on. It
owns reading the thread's state (`state_store`), its compress and the preview of it,
where a compress goes (`route`: `store.origin.ROUTE_*`), whether it calls out to the
platform (`calls_out`: bulk compress sends those three at a time) and the label a page
shows. Every refusal is the source's, typed and audited as the service's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from yuxi_dash.access.roles import Actor
from yuxi_dash.compression import Summarizer
from yuxi_dash.service.compress import CompressResult, StepHook
from yuxi_dash.service.compress_preview import CompressionPreview
from yuxi_dash.store.checkpointer import CheckpointStore


class ThreadSource(Protocol):
    """One thread, ours or the attached platform's."""

    @property
    def thread_id(self) -> str: ...

    @property
    def route(self) -> str:
        """Where a compress goes: "here", "platform" or "none" (`store.origin`)."""
        ...

    @property
    def calls_out(self) -> bool:
        """Whether a compress is a call to the platform (not our lock and engine)."""
        ...

    def label(self, platform: str | None) -> str:
        """ "ours", or "attached: <platform>" (``platform``: the scan's source label)."""
        ...

    def state_store(self) -> CheckpointStore:
        """The checkpointer the thread's state is read from (the platform's: read-only)."""
        ...

    def preview(
        self, *, user_id: str | None = None, summarizer: Summarizer | None = None
    ) -> CompressionPreview:
        """What a compress would do now; locks nothing, writes nothing."""
        ...

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
        """Compress it now (audited); ``ask_platform`` False refuses, without a call, what
        the platform refused before."""
        ...
