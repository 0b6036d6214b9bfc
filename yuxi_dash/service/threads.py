"""Agents and threads: `upsert_agent`, `create_thread`, `set_thread_status`, `import_thread`.

`import_thread` creates or replaces a thread from the `import-thread` JSON
under the thread's lock. The whole document is validated before anything is
written; invalid input changes nothing and leaves one audit row, like every
refusal. Re-importing replaces the state with a new checkpoint (through the
state graph) and keeps every chat-record row (what intake wrote included),
appending only the imported messages the record does not hold yet: a message
without an id gets one derived from its text, and rows intake wrote are linked
to the same message rather than written twice. An agent field the JSON leaves out
takes its default from `yuxi_dash.agents`.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, messages_from_dict
from sqlalchemy.orm import Session

from yuxi_dash import validation
from yuxi_dash.access.audit import record_audit, record_audit_eventually
from yuxi_dash.access.roles import Actor, Role, require_role
from yuxi_dash.agents import AGENT_DEFAULTS
from yuxi_dash.alerts.hooks import after_usage_write
from yuxi_dash.compression import count_tokens
from yuxi_dash.compression.state_format import SUMMARIZATION_EVENT_KEY, TOKEN_USAGE_KEY
from yuxi_dash.compression.thread_state import (
    ThreadContextState,
    message_text,
)
from yuxi_dash.errors import InvalidInput, ThreadNotFound, YuxiDashError
from yuxi_dash.printable_record import Record
from yuxi_dash.service.locking import require_idle, thread_lock, thread_target
from yuxi_dash.service.projection import project_thread
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.models import ORIGIN_ATTACHED, Agent, Conversation, utcnow
from yuxi_dash.store.thread_store import locked_store, replace_messages, state_store
from yuxi_dash.usage import UsageSnapshot, summary_trigger_tokens

IMPORT_ACTION = "import_thread"

_AGENT_FIELDS = ("name", "capabilities", *AGENT_DEFAULTS)


@dataclass(frozen=True)
class ImportResult(Record):
    thread_id: str
    checkpoint_id: str
    created: bool
    messages: int


@dataclass(frozen=True)
class _ImportData:
    """A validated `import-thread` document."""

    thread_id: str
    user_id: str
    title: str
    agent_slug: str
    agent_fields: dict[str, Any]
    messages: list[BaseMessage]


def upsert_agent(session: Session, slug: str, **fields: Any) -> Agent:
    """Create or update an agent by slug (fields: name, capabilities, context_window, ...)."""
    unknown = set(fields) - set(_AGENT_FIELDS)
    if unknown:
        raise InvalidInput(f"unknown agent fields: {', '.join(sorted(unknown))}")
    agent = session.scalar(sa.select(Agent).where(Agent.slug == slug))
    if agent is None:
        agent = Agent(slug=slug, name=fields.pop("name", slug))
        session.add(agent)
    for key, value in fields.items():
        if value is not None:
            setattr(agent, key, list(value) if key == "capabilities" else value)
    session.flush()
    return agent


def create_thread(
    session: Session,
    thread_id: str,
    *,
    user_id: str,
    agent_slug: str,
    title: str = "",
    status: str = "active",
    created_at: datetime | None = None,
) -> Conversation:
    """Insert a conversation row (no checkpoint yet); InvalidInput if the thread exists."""
    if session.scalar(sa.select(Conversation.id).where(Conversation.thread_id == thread_id)):
        raise InvalidInput(f"thread {thread_id} already exists")
    at = created_at or utcnow()
    conv = Conversation(
        thread_id=thread_id,
        user_id=user_id,
        agent_slug=agent_slug,
        title=title,
        status=status,
        created_at=at,
        updated_at=at,
        last_activity_at=at,
        deleted_at=at if status == "deleted" else None,
    )
    session.add(conv)
    session.flush()
    return conv


def set_thread_status(thread_id: str, status: str, *, settings: Settings | None = None) -> None:
    """Archive, delete (soft) or reactivate a thread, under the row lock."""
    thread_id = validation.thread_id(thread_id)
    if status not in ("active", "archived", "deleted"):
        raise InvalidInput(f"unknown thread status {status!r}")
    with thread_lock(thread_id, settings=settings) as (_session, conv):
        if conv is None:
            raise ThreadNotFound(f"thread {thread_id} not found")
        conv.status = status
        conv.deleted_at = utcnow() if status == "deleted" else None


def _id_field(value: Any, name: str) -> str:
    return validation.identifier(value, f"import: {name}")


def _text_field(value: Any, name: str, *, limit: int, required: bool = True) -> str:
    if value is None and not required:
        return ""
    return validation.text(value, f"import: {name}", limit=limit, required=required)


def _validate_import(payload: object) -> _ImportData:
    if not isinstance(payload, dict):
        raise InvalidInput("import: the thread JSON must be an object")
    validation.json_document(payload, "import: the thread JSON")  # depth, NUL, NaN: first
    thread_id = _id_field(payload.get("thread_id"), "thread_id")
    user_id = _id_field(payload.get("user_id"), "user_id")
    title = _text_field(payload.get("title"), "title", limit=512, required=False)
    agent = payload.get("agent")
    if not isinstance(agent, dict):
        raise InvalidInput("import: agent must be an object with at least a slug")
    slug = _id_field(agent.get("slug"), "agent.slug")
    capabilities = agent.get("capabilities", [])
    if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
        raise InvalidInput("import: agent.capabilities must be a list of strings")
    agent_fields: dict[str, Any] = {
        "name": _text_field(agent.get("name", slug), "agent.name", limit=256),
        "capabilities": capabilities,
    }
    for key, default in AGENT_DEFAULTS.items():
        agent_fields[key] = validation.agent_int(
            key, agent.get(key, default), prefix="import: agent."
        )
    raw_messages = payload.get("messages")
    if not isinstance(raw_messages, list):
        raise InvalidInput("import: messages must be a list of LangChain message dicts")
    messages: list[BaseMessage] = []
    for index, raw in enumerate(raw_messages):
        try:
            (message,) = messages_from_dict([raw])
        except Exception as exc:  # noqa: BLE001 - any malformed entry is one clear line
            raise InvalidInput(
                f"import: messages[{index}] is not a LangChain message dict ({type(exc).__name__})"
            ) from exc
        messages.append(message)
    return _ImportData(
        thread_id=thread_id,
        user_id=user_id,
        title=title,
        agent_slug=slug,
        agent_fields=agent_fields,
        messages=messages,
    )


def _with_stable_ids(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages, each without an id given one derived from its role, text and occurrence.

    The same document imported twice gives the same ids, so the chat record
    (which records state messages by id) gains nothing the second time.
    """
    seen: Counter[tuple[str, str]] = Counter()
    result: list[BaseMessage] = []
    for message in messages:
        if message.id:
            result.append(message)
            continue
        key = (message.type, message_text(message))
        seen[key] += 1
        digest = hashlib.sha256(
            f"{key[0]}\x00{key[1]}\x00{seen[key]}".encode("utf-8", "surrogatepass")
        ).hexdigest()
        result.append(message.model_copy(update={"id": f"import-{digest[:32]}"}))
    return result


def _write_import(
    payload: object, *, actor: Actor, settings: Settings
) -> tuple[str, str, bool, list[BaseMessage]]:
    """Validate and write one import under the thread's lock: (id, checkpoint, created, messages)."""
    require_role(actor, Role.OPERATOR, action="importing a thread")
    data = _validate_import(payload)
    thread_id = data.thread_id
    messages = _with_stable_ids(data.messages)
    state = ThreadContextState(thread_id=thread_id, messages=messages)
    with thread_lock(thread_id, settings=settings) as (session, conv):
        store = locked_store(session, state_store(settings))  # commits with the lock
        created = conv is None
        agent = upsert_agent(session, data.agent_slug, **data.agent_fields)
        if conv is None:
            conv = create_thread(
                session,
                thread_id,
                user_id=data.user_id,
                agent_slug=data.agent_slug,
                title=data.title,
            )
        else:
            if conv.user_id != data.user_id:
                raise InvalidInput(
                    f"import: thread {thread_id} belongs to another user; refusing to move it"
                )
            if conv.origin == ORIGIN_ATTACHED:
                raise InvalidInput(
                    f"import: thread {thread_id} belongs to the attached platform; refusing to "
                    "replace it"
                )
            require_idle(session, thread_id)
            conv.agent_slug = data.agent_slug
            conv.title = data.title or conv.title
            if conv.status == "deleted":
                conv.status, conv.deleted_at = "active", None
        tokens = count_tokens(state.model_visible_messages())
        figures = UsageSnapshot(
            llm_input_tokens=tokens,
            next_llm_input_tokens=tokens,
            context_window=agent.context_window,
            summary_trigger_tokens=summary_trigger_tokens(agent.summary_threshold),
            summary_active=state.summary_active(),
        )
        latest = store.latest(thread_id)
        now = utcnow()
        written = store.write(
            thread_id,
            {
                "messages": replace_messages(messages),
                SUMMARIZATION_EVENT_KEY: None,
                TOKEN_USAGE_KEY: {
                    **figures.to_dict(),
                    "imported": True,
                    "measured_at": now.isoformat(),
                },
            },
            expected_checkpoint_id=latest.checkpoint_id if latest else None,
        )
        project_thread(session, conv, store, settings)
        conv.last_activity_at = now
    return thread_id, written.checkpoint_id, created, messages


def import_thread(
    payload: object, *, actor: Actor, settings: Settings | None = None
) -> ImportResult:
    """Create or replace a thread from the `import-thread` JSON (see the module docstring).

    The agent is created or updated from `agent`. Invalid input changes nothing
    and, like every refusal, leaves an audit row.
    """
    settings = settings or get_settings()
    raw_id = payload.get("thread_id") if isinstance(payload, dict) else None
    try:
        thread_id, checkpoint_id, created, messages = _write_import(
            payload, actor=actor, settings=settings
        )
    except YuxiDashError as exc:  # refused: nothing was written, but the attempt is on record
        record_import_refusal(exc, actor=actor, thread_id=raw_id, settings=settings)
        raise
    record_audit(
        actor=actor.id,
        action=IMPORT_ACTION,
        target=thread_target(thread_id),
        outcome="completed",
        detail={"checkpoint_id": checkpoint_id, "created": created, "messages": len(messages)},
        settings=settings,
    )
    after_usage_write(settings, thread_id)  # alerts: an import sets the thread's usage
    return ImportResult(
        thread_id=thread_id, checkpoint_id=checkpoint_id, created=created, messages=len(messages)
    )


def record_import_refusal(
    error: YuxiDashError, *, actor: Actor, thread_id: Any = None, settings: Settings | None = None
) -> None:
    """The audit row of a refused import (also for a file the CLI could not read or parse)."""
    record_audit_eventually(
        actor=actor.id,
        action=IMPORT_ACTION,
        target=thread_target(thread_id) if isinstance(thread_id, str) and thread_id else "thread:?",
        outcome="refused",
        detail={"code": error.code},
        settings=settings,
    )
