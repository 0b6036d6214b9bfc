"""Argument types of the `yuxi-dash` commands: bad input is a usage error, exit 2, one line.

Each is an argparse `type=`: a ratio (finite, 0 or more), integers that fit a signed 64-bit
column (`positive_int`, `non_negative_int`) and a pause in seconds (0..3600).
Imports nothing from the CLI, so every command module can use them.
"""

from __future__ import annotations

import argparse
import math


def ratio(text: str) -> float:
    """An argparse type: a finite, non-negative ratio (0.85 is 85%).

    No upper bound here: the command refuses one too large for its own use with a
    hint (`threads --min-pressure 85` is InvalidInput, audited, not a usage line).
    """
    try:
        value = float(text)
    except ValueError:
        hint = "; a ratio: 0.85 means 85%" if text.strip().endswith("%") else ""
        raise argparse.ArgumentTypeError(f"not a number: {text!r}{hint}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"ratio out of range (0 or more): {text}")
    return value


INT64_MAX = 2**63 - 1  # every count, page and version fits a signed 64-bit column


def _int_argument(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(
            "must be at least 1" if minimum == 1 else "must not be negative"
        )
    if value > INT64_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {INT64_MAX}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: an integer from 1 to 2**63 - 1."""
    return _int_argument(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: an integer from 0 to 2**63 - 1."""
    return _int_argument(text, 0)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or not 0 <= value <= 3600:
        raise argparse.ArgumentTypeError("must be between 0 and 3600 seconds")
    return value


def add_page_flags(parser: argparse.ArgumentParser, *, limit: int, order: str = "") -> None:
    """`--limit N` (at most N, default `limit`) and `--offset N` (skip the first N) of a listing.

    `order` names the listing's order in the offset's help text ("newest first").
    """
    parser.add_argument(
        "--limit",
        type=positive_int,
        default=limit,
        metavar="N",
        help=f"at most N (default: {limit})",
    )
    parser.add_argument(
        "--offset",
        type=non_negative_int,
        default=0,
        metavar="N",
        help=f"skip the first N{', ' + order if order else ''} (default: 0)",
    )
