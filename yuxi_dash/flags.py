"""LaunchDarkly gates for memory: `graphiti-memory` and `graphiti-communities-enabled`.

Three sources, in order: a real SDK key (LAUNCHDARKLY_SDK_KEY), the SDK's Files
data source (YUXI_DASH_LD_FLAGS_FILE; the demo ships one), or nothing — then
every gate is off with the reason "not configured", and the dashboard says so.
Tests hand in a client built on the SDK's `TestData` source.

The evaluation context is the memory user: key = user id, kind `user`, with
`email` and `role` attributes when known. Each result carries LaunchDarkly's
evaluation reason so an operator can see *why* a gate is off.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ldclient import Context
from ldclient.client import LDClient
from ldclient.config import Config

from yuxi_dash.resources import FLAG_EVALUATORS, get_resources
from yuxi_dash.settings import Settings, get_settings

log = logging.getLogger("yuxi_dash.flags")

_INIT_TIMEOUT_SECONDS = 5.0
_OFFLINE_SDK_KEY = "yuxi-dash-local"  # the SDK wants a key; with a file source it is never sent


@dataclass(frozen=True)
class FlagResult:
    """One flag's value for one user and why."""

    key: str
    value: bool
    reason: str  # human line, e.g. "TARGET_MATCH", "FALLTHROUGH", "not configured"
    reason_detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "reason": self.reason}


@dataclass(frozen=True)
class MemoryGates:
    """Both gates for one user, plus where the values came from."""

    user_id: str
    memory: FlagResult
    communities: FlagResult
    source: str  # launchdarkly | file | test_data | not_configured

    @property
    def memory_on(self) -> bool:
        return self.memory.value

    @property
    def communities_on(self) -> bool:
        return self.memory.value and self.communities.value

    def to_dict(self) -> dict[str, Any]:
        return {
            self.memory.key: self.memory.to_dict(),
            self.communities.key: self.communities.to_dict(),
        }


def describe_reason(reason: dict[str, Any] | None) -> str:
    """LaunchDarkly's reason object as one line: kind plus its detail."""
    if not reason:
        return "unknown"
    kind = str(reason.get("kind", "unknown"))
    if kind == "ERROR":
        return f"ERROR ({reason.get('errorKind', 'unknown')})"
    if kind == "RULE_MATCH":
        return f"RULE_MATCH (rule {reason.get('ruleIndex', '?')})"
    if kind == "PREREQUISITE_FAILED":
        return f"PREREQUISITE_FAILED ({reason.get('prerequisiteKey', '?')})"
    return kind


def user_context(user_id: str, *, email: str | None = None, role: str | None = None) -> Context:
    builder = Context.builder(user_id).kind("user")
    if email:
        builder.set("email", email)
    if role:
        builder.set("role", role)
    return builder.build()


class FlagEvaluator:
    """Evaluates the memory gates through one LaunchDarkly client (or none)."""

    def __init__(self, settings: Settings, client: LDClient | None, source: str) -> None:
        self.settings = settings
        self.client = client
        self.source = source

    @classmethod
    def from_settings(cls, settings: Settings) -> FlagEvaluator:
        if settings.launchdarkly_sdk_key:
            config = Config(settings.launchdarkly_sdk_key)
            return cls(settings, LDClient(config, start_wait=_INIT_TIMEOUT_SECONDS), "launchdarkly")
        if settings.ld_flags_file:
            from ldclient.integrations import Files

            path = Path(settings.ld_flags_file)
            source = Files.new_data_source(paths=[str(path)], auto_update=False)
            config = Config(_OFFLINE_SDK_KEY, update_processor_class=source, send_events=False)
            return cls(settings, LDClient(config, start_wait=_INIT_TIMEOUT_SECONDS), "file")
        return cls(settings, None, "not_configured")

    @classmethod
    def from_test_data(cls, settings: Settings, test_data: Any) -> FlagEvaluator:
        """A client on the SDK's `TestData` source (tests)."""
        config = Config(_OFFLINE_SDK_KEY, update_processor_class=test_data, send_events=False)
        return cls(settings, LDClient(config), "test_data")

    def _evaluate(self, key: str, context: Context) -> FlagResult:
        if self.client is None:
            return FlagResult(key, False, "not configured", {"kind": "OFF", "detail": "no source"})
        detail = self.client.variation_detail(key, context, False)
        reason = dict(detail.reason or {})
        value = detail.value if isinstance(detail.value, bool) else False
        return FlagResult(key, value, describe_reason(reason), reason)

    def gates(
        self, user_id: str, *, email: str | None = None, role: str | None = None
    ) -> MemoryGates:
        context = user_context(user_id, email=email, role=role)
        return MemoryGates(
            user_id=user_id,
            memory=self._evaluate(self.settings.memory_flag_key, context),
            communities=self._evaluate(self.settings.communities_flag_key, context),
            source=self.source,
        )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _cache_key(settings: Settings) -> tuple[Any, ...]:
    mtime = None
    if settings.ld_flags_file:
        try:
            mtime = Path(settings.ld_flags_file).stat().st_mtime_ns
        except OSError:
            mtime = -1
    return (
        settings.launchdarkly_sdk_key,
        str(settings.ld_flags_file) if settings.ld_flags_file else None,
        mtime,
        settings.memory_flag_key,
        settings.communities_flag_key,
    )


def get_flag_evaluator(settings: Settings | None = None) -> FlagEvaluator:
    """The process's evaluator for these settings (a changed flag file is re-read)."""
    settings = settings or get_settings()
    key = _cache_key(settings)
    owner = get_resources()
    for old in owner.keys(FLAG_EVALUATORS):  # the same source at an older mtime
        if old != key and isinstance(old, tuple) and old[:2] == key[:2]:
            owner.release(FLAG_EVALUATORS, old)
    return owner.acquire(
        FLAG_EVALUATORS, key, lambda: FlagEvaluator.from_settings(settings), FlagEvaluator.close
    )


def evaluate_gates(
    user_id: str,
    *,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    email: str | None = None,
    role: str | None = None,
) -> MemoryGates:
    evaluator = evaluator or get_flag_evaluator(settings)
    return evaluator.gates(user_id, email=email, role=role)


def close_evaluators() -> None:
    """Close every evaluator this process holds (tests; at exit the resource owner does it)."""
    get_resources().close_kind(FLAG_EVALUATORS)
