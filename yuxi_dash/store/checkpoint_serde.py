"""The one checkpoint serializer: LangGraph's, with an allow-list set here in code.

LangGraph's default `JsonPlusSerializer` imports and calls whatever module and
name a blob's msgpack extension values name unless ``LANGGRAPH_STRICT_MSGPACK``
is set. Every saver here (ours and the attached platform's) gets
`checkpoint_serializer()`, whatever the environment says:

- msgpack: ``allowed_msgpack_modules`` is `ALLOWED_TYPES` (langchain-core
  messages, LangGraph's own types, the standard values its serializer writes:
  exactly the safe list LangGraph admits anyway). LangGraph never imports a
  type it blocks; its serde event tells us, and a blob naming one at any depth
  is `CheckpointRefused` for the whole read, never a half-read state.
- the old ``json`` format: the same list for ``lc: 2`` constructors, and
  langchain-core's reviver limited to message classes for the rest.
- pickle and unknown formats: refused.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import ormsgpack
from langchain_core.load.load import Reviver
from langgraph.checkpoint.serde import jsonplus
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from yuxi_dash.errors import CheckpointRefused

_MESSAGES = "langchain_core.messages"
ALLOWED_TYPES: frozenset[tuple[str, str]] = frozenset(
    {
        # langchain-core messages (the state's `messages`, the summary event's message)
        *(
            (f"{_MESSAGES}.{module}", name)
            for module, kinds in (
                ("base", ("BaseMessage",)),
                ("human", ("HumanMessage",)),
                ("ai", ("AIMessage",)),
                ("system", ("SystemMessage",)),
                ("chat", ("ChatMessage",)),
                ("tool", ("ToolMessage",)),
                ("function", ("FunctionMessage",)),
            )
            for kind in kinds
            for name in (kind, f"{kind}Chunk")
        ),
        (f"{_MESSAGES}.modifier", "RemoveMessage"),
        ("langchain_core.documents.base", "Document"),
        # LangGraph's own types (pending writes, interrupts, the store)
        ("langgraph.types", "Send"),
        ("langgraph.types", "TimeoutPolicy"),
        ("langgraph.types", "Interrupt"),
        ("langgraph.types", "Command"),
        ("langgraph.types", "StateSnapshot"),
        ("langgraph.types", "PregelTask"),
        ("langgraph.types", "Overwrite"),
        ("langgraph.store.base", "Item"),
        ("langgraph.store.base", "GetOp"),
        # the standard values LangGraph's serializer writes (its own safe list)
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("uuid", "UUID"),
        ("decimal", "Decimal"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("collections", "deque"),
        *(
            ("ipaddress", f"IPv{v}{kind}")
            for v in (4, 6)
            for kind in ("Address", "Interface", "Network")
        ),  # fmt: skip
        *(
            (module, name)
            for module in ("pathlib", "pathlib._local")
            for name in ("Path", "PosixPath", "WindowsPath")
        ),  # fmt: skip
        ("zoneinfo", "ZoneInfo"),
        ("re", "compile"),
    }
)
REFUSED_KINDS = frozenset({"msgpack_blocked", "msgpack_method_blocked"})
_FORMATS = frozenset({"null", "bytes", "bytearray", "msgpack", "json"})
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.]")
_NAME_LIMIT = 120

_refused: ContextVar[list[str] | None] = ContextVar("yuxi_dash_checkpoint_refused", default=None)
_listening = threading.Lock()
_listener_on = False
_MESSAGE_REVIVER = Reviver(allowed_objects="messages")


def type_name(*parts: object) -> str:
    """A blob's type name as we show it: dotted, only name characters, clipped."""
    name = ".".join(_NAME_CHARS.sub("?", str(part)) for part in parts)
    return name[:_NAME_LIMIT] or "?"


def refusal(name: str) -> CheckpointRefused:
    """The typed refusal of a checkpoint naming ``name`` (already shown as `type_name`)."""
    return CheckpointRefused(
        f"checkpoint refused: it names {name}, which is not an allowed checkpoint type; "
        "nothing it names was imported or called",
        type=name,
    )


def _on_event(event: SerdeEvent) -> None:
    found = _refused.get()
    if found is not None and event.get("kind") in REFUSED_KINDS:
        found.append(type_name(event.get("module", "?"), event.get("name", "?")))


class _BlockedTypeFilter(logging.Filter):
    """Drop LangGraph's log line naming a blocked type: the name is the blob's text, and the
    refusal is raised and audited instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Blocked deserialization")


def _listen() -> None:
    global _listener_on
    with _listening:
        if not _listener_on:
            register_serde_event_listener(_on_event)
            logging.getLogger(jsonplus.__name__).addFilter(_BlockedTypeFilter())
            _listener_on = True


class Refusing:
    """``with Refusing():`` raises `CheckpointRefused` after the block if LangGraph blocked a type
    inside it (a class, not a generator: it wraps every blob a scan decodes)."""

    def __enter__(self) -> None:
        self.found: list[str] = []
        self.token = _refused.set(self.found)

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        _refused.reset(self.token)
        if kind is None and self.found:
            raise refusal(self.found[0])


class CheckpointSerializer(JsonPlusSerializer):
    """`JsonPlusSerializer` reading only `ALLOWED_TYPES`; anything else is `CheckpointRefused`."""

    def __init__(self) -> None:
        _listen()
        allowed = sorted(ALLOWED_TYPES)
        super().__init__(
            pickle_fallback=False,
            allowed_json_modules=allowed,
            allowed_msgpack_modules=allowed,
        )

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        if data[0] not in _FORMATS:
            raise refusal(type_name("format", data[0]))
        with Refusing():
            return super().loads_typed(data)

    def loads_msgpack(self, data: bytes, memo: dict[tuple[int, bytes], Any] | None = None) -> Any:
        """A msgpack blob; ``memo`` keeps each extension value built (by its bytes) for reuse.

        A value whose building met a blocked type is never kept, so the same
        bytes met again are refused again.
        """
        hook = self._unpack_ext_hook
        if memo is not None:
            hook = _memoized(hook, memo)
        with Refusing():
            return ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)

    def _reviver(self, value: dict[str, Any]) -> Any:
        """The old ``json`` format: allowed ``lc: 2`` constructors, message classes, plain values."""
        ids = value.get("id")
        if value.get("lc") == 2 and value.get("type") == "constructor" and ids is not None:
            parts = [str(p) for p in ids] if isinstance(ids, list) else [str(ids)]
            if len(parts) < 2 or (".".join(parts[:-1]), parts[-1]) not in ALLOWED_TYPES:
                raise refusal(type_name(*parts))
            return self._revive_lc2(value)
        try:
            return _MESSAGE_REVIVER(value)
        except (ValueError, NotImplementedError, TypeError, ImportError):
            raise refusal(type_name(*(ids if isinstance(ids, list) else [ids]))) from None


def _memoized(
    hook: Callable[[int, bytes], Any], memo: dict[tuple[int, bytes], Any]
) -> Callable[[int, bytes], Any]:
    def once(code: int, data: bytes) -> Any:
        key = (code, data)
        if key in memo:
            return memo[key]
        found = _refused.get()
        before = len(found) if found is not None else 0
        value = hook(code, data)
        if found is not None and len(found) == before:
            memo[key] = value
        return value

    return once


def checkpoint_serializer() -> CheckpointSerializer:
    """The serializer every saver of ours and the platform's store is built with."""
    return CheckpointSerializer()


def strict(serde: object) -> CheckpointSerializer:
    """``serde`` when it is `CheckpointSerializer`; a saver built with anything else is refused."""
    if not isinstance(serde, CheckpointSerializer):
        raise TypeError("this checkpoint store was not built with checkpoint_serializer()")
    return serde
