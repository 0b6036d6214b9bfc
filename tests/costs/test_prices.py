"""The prices file: its format, the lookup order and the one typed error for a bad file."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from yuxi_dash.costs.prices import (
    MAX_PRICES_FILE_BYTES,
    Price,
    load_prices,
    parse_prices,
    prices_file_stamp,
    unmatched_keys,
    unmatched_line,
    unpriced_line,
)
from yuxi_dash.errors import InvalidPricesFile
from yuxi_dash.settings import Settings


def _settings(path: Path | None) -> Settings:
    return Settings(model_prices=path)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_without_the_setting_there_are_no_prices() -> None:
    assert load_prices(_settings(None)) is None
    assert Settings(YUXI_DASH_MODEL_PRICES="  ").model_prices is None


def test_cost_is_the_hand_sum(tmp_path: Path) -> None:
    path = _write(tmp_path, {"gpt-x": {"input_per_million": 2.5, "output_per_million": 10}})
    prices = load_prices(_settings(path))
    assert prices is not None
    price = prices.price_for("gpt-x", None)
    assert price == Price(Decimal("2.5"), Decimal("10"))
    # 120_000 input tokens at $2.50/M = $0.30; 3_000 output tokens at $10/M = $0.03
    assert price.cost(120_000, 3_000) == 0.33
    assert price.exact_cost(120_000, 3_000) == Decimal("0.33")
    assert price.cost(0, 0) == 0.0


def test_lookup_is_model_then_agent_then_star() -> None:
    prices = parse_prices(
        json.dumps(
            {
                "model-a": {"input_per_million": 1, "output_per_million": 1},
                "agent-b": {"input_per_million": 2, "output_per_million": 2},
                "*": {"input_per_million": 3, "output_per_million": 3},
            }
        )
    )
    assert prices.price_for("model-a", "agent-b").cost(1_000_000, 0) == 1.0  # model first
    assert prices.price_for("unknown", "agent-b").cost(1_000_000, 0) == 2.0  # then agent
    assert prices.price_for(None, "agent-b").cost(1_000_000, 0) == 2.0
    assert prices.price_for("unknown", "other").cost(1_000_000, 0) == 3.0  # then *
    assert prices.price_for(None, None).cost(1_000_000, 0) == 3.0
    assert prices.price_for("Model-A", None).cost(1_000_000, 0) == 3.0  # exact match only


def test_without_a_star_an_unlisted_model_has_no_price() -> None:
    prices = parse_prices('{"model-a": {"input_per_million": 1, "output_per_million": 1}}')
    assert prices.price_for("model-b", "agent") is None
    assert parse_prices("{}").price_for("model-a", None) is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"m": 1}',
        '{"m": {"input_per_million": 1}}',
        '{"m": {"input_per_million": 1, "output_per_million": 1, "cache": 1}}',
        '{"m": {"input_per_million": "1", "output_per_million": 1}}',
        '{"m": {"input_per_million": true, "output_per_million": 1}}',
        '{"m": {"input_per_million": -1, "output_per_million": 1}}',
        '{"m": {"input_per_million": NaN, "output_per_million": 1}}',
        '{"m": {"input_per_million": 1e999, "output_per_million": 1}}',
        '{" ": {"input_per_million": 1, "output_per_million": 1}}',
        '{"m": {"input_per_million": 1, "output_per_million": 1},'
        ' "m": {"input_per_million": 2, "output_per_million": 2}}',
    ],
)
def test_a_bad_file_is_one_typed_error(text: str) -> None:
    with pytest.raises(InvalidPricesFile) as caught:
        parse_prices(text)
    message = caught.value.message
    assert caught.value.code == "invalid_prices_file"
    assert message.startswith("The prices file (YUXI_DASH_MODEL_PRICES) ")
    assert "\n" not in message


def test_a_missing_big_or_binary_file_is_the_same_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidPricesFile, match="cannot be read"):
        load_prices(_settings(tmp_path / "absent.json"))
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_PRICES_FILE_BYTES + 1))
    with pytest.raises(InvalidPricesFile, match="bytes"):
        load_prices(_settings(big))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(InvalidPricesFile, match="UTF-8"):
        load_prices(_settings(binary))


def test_keys_matching_no_agent_are_named_not_star_nor_agents() -> None:
    prices = parse_prices(
        json.dumps({k: {"input_per_million": 1, "output_per_million": 1} for k in
                    ("gpt-4.1", "coder", "*", "Coder")})
    )  # fmt: skip
    assert unmatched_keys(prices, {"coder", "faq"}) == ["Coder", "gpt-4.1"]  # keys match exactly
    assert unmatched_keys(None, {"coder"}) == []
    line = unmatched_line(["Coder", "gpt-4.1"])
    assert line.endswith(": Coder, gpt-4.1") and "recorded model" in line
    assert unmatched_line([]) == ""


def test_the_unpriced_line_says_how_many_and_what_to_add() -> None:
    assert unpriced_line(0) == ""
    assert unpriced_line(1).startswith("1 model call has no price: add their agent's name")
    assert unpriced_line(12_345).startswith("12,345 model calls have no price")


def test_the_stamp_changes_when_the_file_does(tmp_path: Path) -> None:
    assert prices_file_stamp(_settings(None)) is None
    path = _write(tmp_path, {"*": {"input_per_million": 1, "output_per_million": 2}})
    first = prices_file_stamp(_settings(path))
    assert first is not None and first[0] == str(path)
    path.write_text('{"*": {"input_per_million": 10, "output_per_million": 20}}', "utf-8")
    assert prices_file_stamp(_settings(path)) != first  # the size changed
    assert prices_file_stamp(_settings(tmp_path / "gone.json"))[1:] == (-1, -1)  # type: ignore[index]
