"""What each channel is sent: the webhook's JSON body, its signature, Alertmanager's alerts.

The webhook body is built once, when the state change is decided, and stored
in the outbox; it is signed at send time as HMAC-SHA256 of the exact bytes
sent (``X-Yuxi-Dash-Signature: sha256=<hex>``). Alertmanager gets labels
``alertname``, ``rule``, ``platform``, ``agent``, ``thread_id``, ``severity``
and annotations ``pressure``, ``threshold``, ``agent`` and ``dashboard`` (a
link built from ``YUXI_DASH_PUBLIC_URL``). The ``agent`` label is bounded (the
top agents, else ``other``: `store.labels`); the annotation and the webhook
body carry the real slug. Every value is the stored text, never markup. The alert
name says the rule's kind (`ALERTNAMES`); the measure's annotation is ``pressure``,
``cited_lost`` (items the newest compression lost) or ``minutes_to_threshold`` (minutes
until a forecast crossing of 100%), in the kind's units like ``threshold`` and ``clear_at``:
ratios with four decimals, counts and minutes as they are (``60``). The webhook body
carries the measure in ``pressure`` and its name in ``measure`` (`MEASURES`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from yuxi_dash.settings import Settings
from yuxi_dash.store.models import ALERT_KIND_CITED_LOST, ALERT_KIND_FORECAST, ALERT_KIND_PRESSURE

ALERTNAME = "ThreadContextPressure"  # a pressure rule's
ALERTNAMES = {
    ALERT_KIND_PRESSURE: ALERTNAME,
    ALERT_KIND_CITED_LOST: "CompressionLostCitedEvidence",
    ALERT_KIND_FORECAST: "ThreadForecastCrossing",
}
MEASURES = {ALERT_KIND_CITED_LOST: "cited_lost", ALERT_KIND_FORECAST: "minutes_to_threshold"}
SIGNATURE_HEADER = "X-Yuxi-Dash-Signature"
RESOLVED_KEEP_SECONDS = 900  # a resolved alert is re-sent to Alertmanager (endsAt) this long
EVENT_HEADER = "X-Yuxi-Dash-Event"


def thread_link(thread_id: str, settings: Settings) -> str:
    """The dashboard's page of a thread (its Thread detail, selected by query parameter)."""
    base = settings.public_url.rstrip("/")
    return f"{base}/thread_detail?{urlencode({'thread': thread_id})}"


def webhook_configured(settings: Settings) -> bool:
    """The webhook needs both its URL and its secret (an unsigned notice is never sent)."""
    secret = settings.alert_webhook_secret
    return bool(settings.alert_webhook_url and secret and secret.get_secret_value())


def alertname(kind: str | None) -> str:
    """The alert name of a rule kind (an unknown or missing kind: the pressure rule's)."""
    return ALERTNAMES.get(kind or ALERT_KIND_PRESSURE, ALERTNAME)


def _iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def webhook_payload(
    event_id: str, kind: str, values: dict[str, Any], settings: Settings
) -> dict[str, Any]:
    """The JSON body of one webhook notice (firing or resolved)."""
    return {
        "event_id": event_id,
        "kind": kind,
        "at": _iso(values["changed_at"]),
        "alertname": alertname(values.get("kind")),
        "rule_kind": values.get("kind") or ALERT_KIND_PRESSURE,
        "rule": values["rule_name"],
        "severity": values["severity"],
        "thread_id": values["thread_id"],
        "agent": values["agent_slug"],
        "platform": values["platform"],
        "pressure": values["pressure"],
        "measure": MEASURES.get(values.get("kind") or ALERT_KIND_PRESSURE, "pressure"),
        "fire_at": values["fire_at"],
        "clear_at": values["clear_at"],
        "summary_trigger_tokens": values["threshold_tokens"],
        "episode": values["episode"],
        "dashboard": thread_link(values["thread_id"], settings),
    }


def body_bytes(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of the body with the shared secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def alertmanager_alert(
    row: dict[str, Any], *, ends_at: datetime, agent_label: str, settings: Settings
) -> dict[str, Any]:
    """One alert in Alertmanager's v2 API shape (`POST /api/v2/alerts` takes a list).

    ``agent_label`` is the bounded label value (`store.labels.agent_label`).
    """
    link = thread_link(row["thread_id"], settings)
    kind = row.get("kind") or ALERT_KIND_PRESSURE
    measure = MEASURES.get(kind, "pressure")
    figure = "{:.4f}".format if measure == "pressure" else "{:g}".format
    return {
        "labels": {
            "alertname": alertname(kind),
            "rule": row["rule_name"],
            "platform": row["platform"],
            "agent": agent_label,
            "thread_id": row["thread_id"],
            "severity": row["severity"],
        },
        "annotations": {
            measure: figure(row["pressure"]),
            "threshold": figure(row["fire_at"]),
            "clear_at": figure(row["clear_at"]),
            "summary_trigger_tokens": str(row["threshold_tokens"]),
            "agent": row["agent_slug"],
            "dashboard": link,
        },
        "startsAt": _iso(row["firing_since"]),
        "endsAt": _iso(ends_at),
        "generatorURL": link,
    }
