"""The attached platform's thread as a `ThreadSource`: read there, compressed there.

- State: read-only from the platform's checkpointer (`attach.platform_store.audited_platform_store`:
  a refused checkpoint is audited and the thread quarantined).
- Compress, with ``YUXI_DASH_PLATFORM_URL`` set: `platform.compress.compress_on_platform`
  (audited per attempt, projected again at once; the projection records the
  compression, marked manual and ours here). What the platform refused before
  (`store.origin.platform_refusals`) is refused here without a call, one audit row,
  unless the caller asks it anyway (the API and the CLI's ``--ask-platform`` do). Our API
  caller's ids go into its audit rows as ``caller_<key>``.
- Without the endpoint nobody here can compress it: the core refuses it (422
  thread_attached), audited as every refusal of the core is.
- The preview estimates with our engine on the platform's state; the platform decides.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from yuxi_dash import validation
from yuxi_dash.access.audit import record_audit_eventually, thread_target
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.attach.platform_store import audited_platform_store
from yuxi_dash.compression import Summarizer, get_summarizer
from yuxi_dash.errors import CompressionUnsupported
from yuxi_dash.platform.client import platform_label
from yuxi_dash.platform.compress import AttachedRow, compress_on_platform
from yuxi_dash.service.compress import CompressResult, StepHook, compress_own_thread
from yuxi_dash.service.compress_preview import (
    CompressionPreview,
    agent_limits,
    estimated_preview,
    lease_or_busy_reason,
)
from yuxi_dash.service.locking import require_thread
from yuxi_dash.settings import Settings
from yuxi_dash.store.checkpointer import CheckpointStore
from yuxi_dash.store.compressions import mark_manual
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import Agent, Conversation
from yuxi_dash.store.origin import (
    COMPRESS_ACTION,
    ROUTE_PLATFORM,
    platform_refusals,
)
from yuxi_dash.store.thread_store import StoredState
from yuxi_dash.wording import attached_label

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttachedSource:
    """A thread the attached platform owns: its state, lock and compress are the platform's."""

    row: AttachedRow
    checkpoint_id: str | None  # the checkpoint we projected it up to (None: never)
    settings: Settings
    route: str  # ROUTE_PLATFORM, or ROUTE_NONE when no endpoint is set

    @property
    def thread_id(self) -> str:
        return self.row.thread_id

    @property
    def calls_out(self) -> bool:
        return self.route == ROUTE_PLATFORM

    def label(self, platform: str | None) -> str:
        return attached_label(platform)

    def state_store(self) -> CheckpointStore:
        return audited_platform_store(self.thread_id, self.checkpoint_id, self.settings)

    def preview(
        self, *, user_id: str | None = None, summarizer: Summarizer | None = None
    ) -> CompressionPreview:
        thread_id = validation.thread_id(self.thread_id)
        with session_scope(self.settings) as session:
            conv = session.scalar(
                sa.select(Conversation).where(Conversation.thread_id == thread_id)
            )
            conv = require_thread(conv, thread_id, user_id=user_id)
            agent = session.scalar(sa.select(Agent).where(Agent.slug == conv.agent_slug))
            busy = lease_or_busy_reason(session, conv)
            limits = agent_limits(agent)
            refused = (
                platform_refusals(session).of(thread_id, conv.agent_slug)
                if self.calls_out
                else None
            )
        latest = self.state_store().latest(thread_id)
        refusal = None
        if not self.calls_out:
            refusal = "thread_attached"
        elif refused:
            refusal = "compression_unsupported"
        return estimated_preview(
            thread_id,
            StoredState.of(latest) if latest is not None else None,
            limits,
            summarizer=summarizer or get_summarizer(self.settings),
            evidence_budget_tokens=self.settings.summary_evidence_budget_tokens,
            busy=busy,
            refusal=refusal,
            capable=refusal is None,
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
        ids = {f"caller_{key}": value for key, value in (caller_ids or {}).items()}
        if not self.calls_out:  # the core refuses it: 422 thread_attached, audited
            return compress_own_thread(
                self.thread_id,
                actor=actor,
                expected_checkpoint_id=expected_checkpoint_id,
                user_id=user_id,
                settings=self.settings,
                caller_ids=ids,
            )
        if not ask_platform:
            self._refuse_remembered(actor)
        done = compress_on_platform(
            self.row,
            actor=actor,
            expected_checkpoint_id=expected_checkpoint_id,
            user_id=user_id,
            settings=self.settings,
            caller_ids=ids,
        )
        if done.status == "completed":  # a no_op names the newest checkpoint: not ours
            self._record_who_asked(actor, done.checkpoint_id)
        return CompressResult(
            thread_id=done.thread_id,
            status=done.status,
            before_tokens=done.before_tokens,
            after_tokens=done.after_tokens,
            compressed_messages=done.compressed_messages,
            file_path=done.file_path,
            reason=done.reason,
            checkpoint_id=done.checkpoint_id,
        )

    def _record_who_asked(self, actor: Actor, checkpoint_id: str | None) -> None:
        """The projection recorded the platform's compression; say it was ours, and whose."""
        try:
            with session_scope(self.settings) as session:
                mark_manual(session, self.thread_id, checkpoint_id, actor.id)
        except Exception:  # noqa: BLE001 - the compress happened; the record stays automatic
            log.warning("could not mark a platform compress as manual in its record")

    def _refuse_remembered(self, actor: Actor) -> None:
        """Before a call: refuse (one audit row) what the platform refused before.

        Only an operator's compress of a thread that is not deleted is checked here;
        every other refusal is the platform call's.
        """
        if actor.role < Role.OPERATOR or self.row.status == "deleted":
            return
        with session_scope(self.settings) as session:
            reason = platform_refusals(session).of(self.thread_id, self.row.agent_slug)
        if reason is None:
            return
        detail: dict[str, Any] = {
            "role": actor.role.label,
            "via": actor.via,
            "platform": platform_label(str(self.settings.platform_url)),
            "agent": self.row.agent_slug,
            "code": CompressionUnsupported.code,
            "remembered": True,  # nothing was sent: this row is not the platform's word
        }
        try:
            record_audit_eventually(
                actor=actor.id,
                action=COMPRESS_ACTION,
                target=thread_target(self.thread_id),
                outcome="refused",
                detail=detail,
                settings=self.settings,
            )
        except Exception:  # noqa: BLE001 - the refusal must reach the caller, not the hiccup
            log.error("audit row for a remembered compress refusal could not be written")
        raise CompressionUnsupported(
            f"{reason}; nothing was sent (`yuxi-dash compress --ask-platform` asks it again)"
        )
