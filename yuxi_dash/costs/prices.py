"""The prices file (`YUXI_DASH_MODEL_PRICES`): dollars per million tokens, by model or agent.

The file is one JSON object. Each key is a model name, an agent name or ``*``; each value is
``{"input_per_million": number, "output_per_million": number}`` in dollars (both required,
finite, not negative; no other field). No prices are shipped: without the setting there is
no `ModelPrices` and callers show tokens only. Lookup (`ModelPrices.price_for`): the model
name a call recorded, then the agent name, then ``*``; keys match exactly. Calls recorded
before calls named their model match agent keys and ``*`` only. `unmatched_keys` names the
keys that match no agent and no recorded model.

Rules: the path comes only from the setting; at most `MAX_PRICES_FILE_BYTES` are read; any
fault (missing, too big, not UTF-8, not JSON, wrong shape) is one `InvalidPricesFile` whose
message names the setting and what to fix (at most a key's first 60 characters). Amounts are
`Decimal` (parsed from the JSON text): a cost is the exact product rounded once to a float.
`prices_file_stamp` (path, mtime, size) is what a cache or a once-per-change log keys on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from yuxi_dash.errors import InvalidPricesFile
from yuxi_dash.settings import Settings

SETTING = "YUXI_DASH_MODEL_PRICES"
ANY_KEY = "*"
MAX_PRICES_FILE_BYTES = 1024 * 1024
FIELDS = ("input_per_million", "output_per_million")
TOKENS_PER_MILLION = Decimal(1_000_000)
NO_PRICES_HINT = f"set {SETTING} to a prices file to see dollars"
UNPRICED_ADVICE = "add their agent's name or `*` to the prices file"
UNMATCHED_ADVICE = "a model key prices the calls that record that exact model name"


def unpriced_line(calls: int) -> str:
    """The one line saying how many calls have no price and what to do ("" for none)."""
    if calls <= 0:
        return ""
    noun = "model call has" if calls == 1 else "model calls have"
    return f"{calls:,} {noun} no price: {UNPRICED_ADVICE}"


def unmatched_line(keys: Collection[str]) -> str:
    """The one line naming the prices file's keys that match no agent or recorded model."""
    if not keys:
        return ""
    shown = ", ".join(key[:60] for key in list(keys)[:10])
    more = f" and {len(keys) - 10:,} more" if len(keys) > 10 else ""
    return (
        "Prices file keys matching no agent or recorded model "
        f"(priced nothing; {UNMATCHED_ADVICE}): {shown}{more}"
    )


@dataclass(frozen=True)
class Price:
    """Dollars per million input tokens and per million output tokens."""

    input_per_million: Decimal
    output_per_million: Decimal

    def exact_cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        """The dollars of these tokens, exact (sum these, then round once with `float`)."""
        return (
            Decimal(int(input_tokens)) * self.input_per_million
            + Decimal(int(output_tokens)) * self.output_per_million
        ) / TOKENS_PER_MILLION

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        """The dollars of these tokens."""
        return float(self.exact_cost(input_tokens, output_tokens))


@dataclass(frozen=True)
class ModelPrices:
    """The prices of one prices file, keyed by model name, agent name or ``*``."""

    prices: Mapping[str, Price]

    def price_for(self, model: str | None, agent: str | None) -> Price | None:
        """The model's price, else the agent's, else ``*``'s; None when none is listed."""
        for key in (model, agent, ANY_KEY):
            if key is not None and key in self.prices:
                return self.prices[key]
        return None


def prices_file_stamp(settings: Settings) -> tuple[str, int, int] | None:
    """The prices file's (path, mtime in ns, size); None when the setting is unset. A file
    that cannot be stat'ed is (path, -1, -1): `load_prices` says what is wrong with it."""
    if settings.model_prices is None:
        return None
    path = str(settings.model_prices)
    try:
        info = Path(path).stat()
    except OSError:
        return path, -1, -1
    return path, info.st_mtime_ns, info.st_size


def unmatched_keys(prices: ModelPrices | None, agents: Collection[str]) -> list[str]:
    """The keys that are neither ``*`` nor one of ``agents`` (the agents and recorded models,
    `spend.matched_names`), sorted: models no call recorded, or typos; they price nothing."""
    if prices is None:
        return []
    return sorted(key for key in prices.prices if key != ANY_KEY and key not in agents)


def load_prices(settings: Settings) -> ModelPrices | None:
    """The prices file the setting names; None when the setting is unset."""
    if settings.model_prices is None:
        return None
    return parse_prices(_read_capped(Path(settings.model_prices)))


def parse_prices(text: str) -> ModelPrices:
    """`ModelPrices` from the file's text; `InvalidPricesFile` when it is not the format."""
    try:
        data = json.loads(
            text, parse_float=Decimal, parse_constant=_no_constant, object_pairs_hook=_no_repeats
        )
    except (ValueError, RecursionError) as exc:
        raise _invalid("is not valid JSON with each key once") from exc
    if not isinstance(data, dict):
        raise _invalid('must be one JSON object: {"<model, agent or *>": {...}}')
    prices: dict[str, Price] = {}
    for key, value in data.items():
        if not key.strip():
            raise _invalid("has an empty key: name a model, an agent or *")
        prices[key] = _price(key, value)
    return ModelPrices(prices=prices)


def _price(key: str, value: Any) -> Price:
    where = f"entry {key[:60]!r}"
    if not isinstance(value, dict) or set(value) != set(FIELDS):
        raise _invalid(f"{where} must have exactly input_per_million and output_per_million")
    amounts = [_amount(where, name, value[name]) for name in FIELDS]
    return Price(input_per_million=amounts[0], output_per_million=amounts[1])


def _amount(where: str, name: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        raise _invalid(f"{where}: {name} must be a number of dollars")
    amount = Decimal(value)
    if not math.isfinite(float(amount)) or amount < 0:
        raise _invalid(f"{where}: {name} must be a finite number, 0 or more")
    return amount


def _read_capped(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_PRICES_FILE_BYTES + 1)
    except OSError as exc:
        raise _invalid("cannot be read: check the path and its permissions") from exc
    if len(raw) > MAX_PRICES_FILE_BYTES:
        raise _invalid(f"is over {MAX_PRICES_FILE_BYTES} bytes: keep one entry per model or agent")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("is not UTF-8 text") from exc


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError("a key is repeated")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON numbers


def _invalid(problem: str) -> InvalidPricesFile:
    return InvalidPricesFile(f"The prices file ({SETTING}) {problem}.")


def dollars(amount: float | None) -> str:
    """Dollars as pages and commands show them: "$12.35", "$0.0042"; "-" for None."""
    if amount is None:
        return "-"
    return f"${amount:,.2f}" if abs(amount) >= 1 else f"${amount:.4f}"
