"""`GET /metrics`: fleet aggregates for Prometheus, read from the database at scrape time.

`router` is included by `api.app.create_app`. A scrape needs a service token of
any role (`Authorization: Bearer`, as Prometheus' `authorization` block sends
it): the labels name agents, rules and the attached platform's host. A refused
scrape is 401 and not audited (a scraper retries every interval); 503 when the
database cannot check the token. `DatabaseCollector` (a registry per scrape)
runs a few bounded GROUP BY queries: thread bands and pressure histogram, compress
outcomes (audit log), the cited evidence kept in view per compression and agent, model
calls and tokens per agent (counters) and their dollars at today's prices (a gauge;
`costs.spend`), attach scan timing and lag, alerts and their channels; `..._database_up`
is 0 when they fail. Every label has few values (band, agent, platform, outcome, code,
channel, rule, state, source): never a thread or user id; ``agent`` names the top
``YUXI_DASH_LABEL_AGENTS_MAX`` agents, then ``other`` (`store.labels`).
docs/operations.md lists the names.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

import sqlalchemy as sa
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session

from yuxi_dash.api.service_tokens import authenticate, bearer_token
from yuxi_dash.attach.checkpoint_clock import checkpoint_time
from yuxi_dash.costs.prices import ModelPrices, load_prices, prices_file_stamp
from yuxi_dash.costs.spend import spend_per_agent_label
from yuxi_dash.errors import InvalidPricesFile, StoreUnavailable, Unauthorized, YuxiDashError
from yuxi_dash.settings import Settings
from yuxi_dash.store.compressions import CompressionRecord
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.labels import agent_label_column, top_agents
from yuxi_dash.store.models import (
    AlertChannel,
    AlertOutbox,
    AlertState,
    AuditEntry,
    Conversation,
    ScanTiming,
    ScanWatermark,
    utcnow,
)
from yuxi_dash.store.origin import origin_name_sql

log = logging.getLogger(__name__)

# (upper edge, label): a thread is in the first band whose edge its pressure is below
BANDS = ((0.5, "lt_50"), (0.8, "50_80"), (0.85, "80_85"), (1.0, "85_100"))
TOP_BAND = "ge_100"
BUCKETS = (0.25, 0.5, 0.75, 0.8, 0.85, 0.9, 1.0, 1.25, 1.5, 2.0)
SHARE_TENTHS = tuple(range(1, 11))  # the cited share's edges, 0.1 .. 1.0, in tenths
_UUID_EPOCH_TICKS = 0x01B21DD213814000  # 1582-10-15 to 1970-01-01 in 100-ns ticks


def _band_expression() -> sa.ColumnElement[str]:
    ratio = Conversation.summary_pressure_ratio
    return sa.case(*((ratio < edge, label) for edge, label in BANDS), else_=TOP_BAND)


def _threads(session: Session, settings: Settings) -> Iterator[Metric]:
    band = _band_expression().label("band")
    bands = GaugeMetricFamily(
        "yuxi_dash_threads",
        "Threads (not deleted) per summary-pressure band, agent (top N, else other) and platform",
        labels=["band", "agent", "platform"],
    )
    agent = agent_label_column(top_agents(session, settings.label_agents_max)).label("agent")
    platform = origin_name_sql().label("platform")
    query = (
        sa.select(band, agent, platform, sa.func.count())
        .where(Conversation.status != "deleted")
        .group_by(band, agent, platform)
    )
    for band_value, agent_value, platform_value, count in session.execute(query):
        bands.add_metric([band_value, agent_value, platform_value], float(count))
    yield bands
    ratio = Conversation.summary_pressure_ratio
    columns = [sa.func.sum(sa.case((ratio <= edge, 1), else_=0)) for edge in BUCKETS]
    row = session.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(ratio), 0.0), *columns).where(
            Conversation.status != "deleted"
        )
    ).one()
    total, summed, *cumulative = row
    buckets = [(str(edge), float(n or 0)) for edge, n in zip(BUCKETS, cumulative, strict=True)]
    buckets.append(("+Inf", float(total)))
    yield HistogramMetricFamily(
        "yuxi_dash_thread_summary_pressure",
        "Summary pressure of the threads (not deleted)",
        buckets=buckets,
        sum_value=float(summed),
    )


def _compress(session: Session, settings: Settings) -> Iterator[Metric]:
    family = CounterMetricFamily(
        "yuxi_dash_compress", "Compress attempts by outcome and error code (audit log)",
        labels=["outcome", "code"],
    )  # fmt: skip
    code = AuditEntry.detail["code"].as_string()
    query = (
        sa.select(AuditEntry.outcome, code, sa.func.count())
        .where(AuditEntry.action == "compress")
        .group_by(AuditEntry.outcome, code)
    )
    for outcome, error_code, count in session.execute(query):
        family.add_metric([outcome, error_code or ""], float(count))
    yield family


def _attach(session: Session, settings: Settings) -> Iterator[Metric]:
    now = utcnow()
    duration = GaugeMetricFamily(
        "yuxi_dash_attach_scan_duration_seconds", "How long the last attach scan took",
        labels=["source"],
    )  # fmt: skip
    for timing in session.scalars(sa.select(ScanTiming)):
        duration.add_metric([timing.source], timing.seconds)
    yield duration
    age = GaugeMetricFamily(
        "yuxi_dash_attach_scan_age_seconds", "Seconds since the last attach scan stored its mark",
        labels=["source"],
    )  # fmt: skip
    lag = GaugeMetricFamily(
        "yuxi_dash_attach_watermark_lag_seconds",
        "Seconds between now and the newest platform checkpoint projected",
        labels=["source"],
    )
    for mark in session.scalars(sa.select(ScanWatermark)):
        age.add_metric([mark.source], max(0.0, (now - mark.scanned_at).total_seconds()))
        ticks = checkpoint_time(mark.checkpoint_id) if mark.checkpoint_id else None
        if ticks is not None:
            seconds = (ticks - _UUID_EPOCH_TICKS) / 10_000_000
            lag.add_metric([mark.source], max(0.0, now.timestamp() - seconds))
    yield age
    yield lag


def _compressions(session: Session, settings: Settings) -> Iterator[Metric]:
    """Per agent label, the compressions whose summarized part held cited evidence, by the
    share of it kept in view (``cited_visible / cited_total``); edges compared as integers."""
    family = HistogramMetricFamily(
        "yuxi_dash_compression_cited_in_view_ratio",
        "Share of the cited evidence each compression kept in the model's view "
        "(compressions whose summarized part held cited evidence), per agent (top N, else other)",
        labels=["agent"],
    )
    record = CompressionRecord
    top = top_agents(session, settings.label_agents_max)
    agent = agent_label_column(top, record.agent_slug).label("agent")
    at_or_below = [
        sa.func.sum(sa.case((record.cited_visible * 10 <= tenth * record.cited_total, 1), else_=0))
        for tenth in SHARE_TENTHS
    ]
    share = sa.cast(record.cited_visible, sa.Float) / sa.cast(record.cited_total, sa.Float)
    query = (
        sa.select(agent, sa.func.count(), sa.func.coalesce(sa.func.sum(share), 0.0), *at_or_below)
        .where(record.cited_total > 0)
        .group_by(agent)
    )
    for label, count, summed, *cumulative in session.execute(query):
        buckets = [
            (str(tenth / 10), float(n or 0))
            for tenth, n in zip(SHARE_TENTHS, cumulative, strict=True)
        ]
        buckets.append(("+Inf", float(count)))
        family.add_metric([label], buckets, sum_value=float(summed or 0.0))
    yield family


_BAD_PRICES_LOGGED: list[object] = [None]  # the prices file stamp last logged as bad


def _scrape_prices(settings: Settings) -> ModelPrices | None:
    """The prices, or None with a warning logged once per change of a bad file (not per scrape)."""
    try:
        return load_prices(settings)
    except InvalidPricesFile:
        stamp = prices_file_stamp(settings)
        if _BAD_PRICES_LOGGED[0] != stamp:
            _BAD_PRICES_LOGGED[0] = stamp
            log.warning("metrics: the prices file is not valid; dollars left out until fixed")
        return None


def _model_calls(session: Session, settings: Settings) -> Iterator[Metric]:
    """The recorded model calls and tokens per agent label (counters: they only grow while
    usage rows are kept), and with a prices file their dollars at today's prices and the calls
    no entry prices (gauges: a price edit moves them either way). `costs.spend`."""
    prices = _scrape_prices(settings)
    top = top_agents(session, settings.label_agents_max)
    counters = {
        "calls": CounterMetricFamily(
            "yuxi_dash_model_calls", "Recorded model calls per agent (top N, else other)",
            labels=["agent"],
        ),
        "input": CounterMetricFamily(
            "yuxi_dash_model_input_tokens", "Input tokens of the recorded model calls per agent",
            labels=["agent"],
        ),
        "output": CounterMetricFamily(
            "yuxi_dash_model_output_tokens",
            "Output tokens (what each answer added) of the recorded model calls per agent",
            labels=["agent"],
        ),
    }  # fmt: skip
    cost = GaugeMetricFamily(
        "yuxi_dash_model_cost_dollars",
        "Dollars of every recorded model call per agent at today's YUXI_DASH_MODEL_PRICES "
        "(a gauge: editing a price re-prices past calls)",
        labels=["agent"],
    )
    unpriced = GaugeMetricFamily(
        "yuxi_dash_model_unpriced_calls",
        "Recorded model calls per agent that no entry of YUXI_DASH_MODEL_PRICES prices",
        labels=["agent"],
    )
    for row in spend_per_agent_label(session, prices, top=top):
        counters["calls"].add_metric([row.key], float(row.model_calls))
        counters["input"].add_metric([row.key], float(row.input_tokens))
        counters["output"].add_metric([row.key], float(row.output_tokens))
        if row.cost_usd is not None:
            cost.add_metric([row.key], row.cost_usd)
        unpriced.add_metric([row.key], float(row.unpriced_calls))
    yield from counters.values()
    if prices is not None:
        yield cost
        yield unpriced


def _alerts(session: Session, settings: Settings) -> Iterator[Metric]:
    alerts = GaugeMetricFamily(
        "yuxi_dash_alerts", "Alerts per rule, severity and state",
        labels=["rule", "severity", "state"],
    )  # fmt: skip
    query = sa.select(
        AlertState.rule_name, AlertState.severity, AlertState.state, sa.func.count()
    ).group_by(AlertState.rule_name, AlertState.severity, AlertState.state)
    for rule, severity, state, count in session.execute(query):
        alerts.add_metric([rule, severity, state], float(count))
    yield alerts
    failures = CounterMetricFamily(
        "yuxi_dash_alert_notification_failures", "Failed alert deliveries per channel",
        labels=["channel"],
    )  # fmt: skip
    sent = CounterMetricFamily(
        "yuxi_dash_alert_notifications_sent", "Alert notices delivered per channel",
        labels=["channel"],
    )  # fmt: skip
    paused = GaugeMetricFamily(
        "yuxi_dash_alert_channel_paused", "1 while a channel is paused", labels=["channel"]
    )
    for channel in session.scalars(sa.select(AlertChannel)):
        failures.add_metric([channel.channel], float(channel.failures_total))
        sent.add_metric([channel.channel], float(channel.sent_total))
        paused.add_metric([channel.channel], 1.0 if channel.paused_at else 0.0)
    yield failures
    yield sent
    yield paused
    unsent = session.scalar(
        sa.select(sa.func.count()).select_from(AlertOutbox).where(AlertOutbox.sent_at.is_(None))
    )
    yield GaugeMetricFamily(
        "yuxi_dash_alert_outbox_unsent",
        "Webhook notices not delivered yet",
        value=float(unsent or 0),
    )


Part = Callable[[Session, Settings], Iterator[Metric]]
DATABASE_PARTS: tuple[Part, ...] = (
    _threads, _compress, _compressions, _model_calls, _attach, _alerts,
)  # fmt: skip


class DatabaseCollector(Collector):
    """Reads the aggregates at scrape time; a database that fails gives `..._database_up 0`.
    ``parts``: the families to read (`DATABASE_PARTS`; `bench/costs.py` leaves one out)."""

    def __init__(self, settings: Settings, parts: tuple[Part, ...] = DATABASE_PARTS) -> None:
        self.settings = settings
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        families: list[Metric] = []
        up = 1.0
        try:
            with session_scope(self.settings) as session:
                for part in self.parts:
                    families.extend(part(session, self.settings))
        except Exception as exc:  # noqa: BLE001 - a scrape reports the failure as a metric
            log.warning("metrics: the database could not be read (%s)", type(exc).__name__)
            families, up = [], 0.0
        yield from families
        yield GaugeMetricFamily(
            "yuxi_dash_metrics_database_up", "1 when the last scrape read the database", value=up
        )
        yield GaugeMetricFamily(
            "yuxi_dash_metrics_scrape_seconds",
            "Seconds the database aggregates took to read",
            value=time.perf_counter() - started,
        )


def exposition(settings: Settings) -> bytes:
    """The Prometheus text of the aggregates (a registry per call: nothing kept between scrapes)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(settings))
    return generate_latest(registry)


def _authorize(authorization: list[str], settings: Settings) -> None:
    if len(authorization) != 1:
        raise Unauthorized("send one Authorization header with a bearer token")
    try:
        authenticate(bearer_token(authorization[0]), settings)  # any role may read aggregates
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise StoreUnavailable("database unavailable; check YUXI_DASH_DATABASE_URL") from exc


router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """The Prometheus text exposition of the aggregates, for a caller with a token."""
    settings: Settings = request.app.state.settings
    try:
        _authorize(request.headers.getlist("authorization"), settings)
    except YuxiDashError as exc:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        body = {"detail": {"code": exc.code, "message": exc.message}}
        return JSONResponse(body, status_code=exc.status_code, headers=headers)
    return Response(exposition(settings), media_type=CONTENT_TYPE_LATEST)
