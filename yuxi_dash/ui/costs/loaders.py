"""Cached reads of model cost: the fleet's spend per agent and day, and one thread's cost.

Each is `ui.cache.settings_cached` (the configured TTL; the database URL and the prices
file's path, mtime and size in its key, so an edited file is read again at once) and
returns picklable data (dicts, DataFrames), as `ui.loaders` does. The prices file is read
inside the loader: a bad one is returned as ``error`` (its one-line message) so the page
says what to fix and still shows the tokens. ``unmatched`` names the file's keys that are
neither ``*`` nor an agent or recorded model of the database (`costs.prices.unmatched_keys`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd

from yuxi_dash.costs.prices import ModelPrices, load_prices, prices_file_stamp, unmatched_keys
from yuxi_dash.costs.savings import compression_savings
from yuxi_dash.costs.spend import matched_names, spend, spend_per_agent_day
from yuxi_dash.errors import InvalidPricesFile
from yuxi_dash.settings import get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.labels import top_agents
from yuxi_dash.ui.cache import settings_cached

DAY_COLUMNS = [
    "day",
    "agent",
    "model_calls",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "unpriced_calls",
]
PricesStamp = tuple[str, int, int] | None


def _key() -> tuple[str, PricesStamp]:
    settings = get_settings()
    return settings.database_url, prices_file_stamp(settings)


def _prices() -> tuple[ModelPrices | None, str | None]:
    try:
        return load_prices(get_settings()), None
    except InvalidPricesFile as exc:
        return None, exc.message


@settings_cached
def _fleet_spend(database_url: str, prices_stamp: PricesStamp, since: datetime) -> dict[str, Any]:
    prices, error = _prices()
    settings = get_settings()
    with session_scope(settings) as session:
        top = top_agents(session, settings.label_agents_max)
        days = spend_per_agent_day(session, prices, top=top, since=since)
        unmatched = unmatched_keys(prices, matched_names(session, prices))
    frame = pd.DataFrame([d.to_dict() for d in days], columns=DAY_COLUMNS)
    return {"priced": prices is not None, "error": error, "unmatched": unmatched, "days": frame}


def fleet_spend(since: datetime) -> dict[str, Any]:
    """{"priced", "error": a bad prices file's message or None, "unmatched": keys matching no
    agent or recorded model, "days": a frame of `DAY_COLUMNS`, one row per UTC day and agent
    label, calls measured at ``since`` or later}."""
    return _fleet_spend(*_key(), since)


@settings_cached
def _thread_cost(database_url: str, prices_stamp: PricesStamp, thread_id: str) -> dict[str, Any]:
    prices, error = _prices()
    with session_scope(get_settings()) as session:
        rows = spend(session, prices, "thread", thread_id=thread_id)
        savings = compression_savings(session, prices, thread_id)
        unmatched = unmatched_keys(prices, matched_names(session, prices))
    return {
        "priced": prices is not None,
        "error": error,
        "unmatched": unmatched,
        "spend": rows[0].to_dict() if rows else None,
        "savings": [s.to_dict() for s in savings],
    }


def thread_cost(thread_id: str) -> dict[str, Any]:
    """{"priced", "error", "unmatched", "spend": the thread's `costs.spend.Spend` as a dict (None: no call
    recorded), "savings": its compressions' `CompressionSaving` dicts, oldest first}."""
    return _thread_cost(*_key(), thread_id)
