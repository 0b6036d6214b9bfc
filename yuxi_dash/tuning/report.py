"""What a tuning replay found, side by side: `side_summary`, `TuningResult.to_dict`, the text.

Each side (the settings in force, the proposal) sums its thread replays: compressions
(summaries, as the platform and the Overview count them; per thread and per 1,000
turns) and, apart, the passes that only offloaded tool results, model input tokens per turn (mean, p95) and in total, the cited evidence its summaries
kept in view (a thread with no summary: its compress preview's), and the threads at or
above 85% of the trigger at the end. The JSON is
``{"current": {...}, "proposed": {...}, "threads": [...], ...}``; it ends with the
proposal as the agent's configuration fields, units included (`config_fields`).
Turns are model calls numbered from 1, in the JSON and on the chart alike. A side's
figures are estimates (``estimated``) whenever a summary ran in its replay: the replay
summarizes with the offline extractive summarizer, whatever the agent's middleware
or its platform uses. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from yuxi_dash.tuning.replay import CompressionSettings, ThreadReplay
from yuxi_dash.tuning.sample import Estimate

SIDES = ("current", "proposed")
ESTIMATE_NOTE = (
    "figures after a summary are estimates: the replay summarizes with the offline "
    "extractive summarizer, which may not be the one the agent uses"
)


def config_fields(settings: CompressionSettings) -> dict[str, dict[str, Any]]:
    """The settings as the agent's configuration fields (`store.models.Agent`), with units."""
    return {
        "summary_threshold": {
            "value": settings.summary_threshold_k,
            "unit": f"K tokens (x 1024 = {settings.trigger_tokens:,} tokens)",
        },
        "summary_tool_result_token_limit": {
            "value": settings.tool_result_token_limit,
            "unit": "tokens",
        },
        "summary_keep_messages": {"value": settings.keep_messages, "unit": "messages"},
    }


def percentile(values: Sequence[int], share: float) -> int:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass(frozen=True)
class SideSummary:
    """One side's figures over the replayed threads."""

    settings: CompressionSettings
    threads: int
    turns: int
    compressions: int  # summaries
    offload_only_passes: int
    input_tokens_total: int
    input_tokens_per_turn_mean: float
    input_tokens_per_turn_p95: int
    cited_total: int
    cited_in_view: int
    threads_at_or_above_85: int
    estimated: bool
    evidence_from_previews: int = 0  # threads with no summary: their preview's kept records
    cost_usd: float | None = None
    fleet_estimate: dict[str, Estimate] = field(default_factory=dict)

    @property
    def compressions_per_thread(self) -> float:
        return self.compressions / self.threads if self.threads else 0.0

    @property
    def compressions_per_1000_turns(self) -> float:
        return 1000 * self.compressions / self.turns if self.turns else 0.0

    @property
    def evidence_kept_share(self) -> float | None:
        return self.cited_in_view / self.cited_total if self.cited_total else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": config_fields(self.settings),
            "threads": self.threads,
            "turns": self.turns,
            "compressions": self.compressions,
            "compressions_per_thread": round(self.compressions_per_thread, 3),
            "compressions_per_1000_turns": round(self.compressions_per_1000_turns, 1),
            "offload_only_passes": self.offload_only_passes,
            "input_tokens_total": self.input_tokens_total,
            "input_tokens_per_turn_mean": round(self.input_tokens_per_turn_mean, 1),
            "input_tokens_per_turn_p95": self.input_tokens_per_turn_p95,
            "evidence_cited": self.cited_total,
            "evidence_cited_in_view": self.cited_in_view,
            "evidence_kept_share": (
                None if self.evidence_kept_share is None else round(self.evidence_kept_share, 4)
            ),
            "evidence_from_previews": self.evidence_from_previews,
            "threads_at_or_above_85": self.threads_at_or_above_85,
            "estimated": self.estimated,
            "cost_usd": None if self.cost_usd is None else round(self.cost_usd, 4),
            "fleet_estimate": {name: e.to_dict() for name, e in self.fleet_estimate.items()},
        }


def side_summary(settings: CompressionSettings, replays: Sequence[ThreadReplay]) -> SideSummary:
    """The sums of one side's replays."""
    inputs = [tokens for replay in replays for tokens in replay.input_tokens]
    summaries = sum(len(replay.compression_turns) for replay in replays)
    return SideSummary(
        settings=settings,
        threads=len(replays),
        turns=len(inputs),
        compressions=summaries,
        offload_only_passes=sum(len(replay.offload_turns) for replay in replays),
        input_tokens_total=sum(inputs),
        input_tokens_per_turn_mean=sum(inputs) / len(inputs) if inputs else 0.0,
        input_tokens_per_turn_p95=percentile(inputs, 0.95),
        cited_total=sum(replay.cited_total for replay in replays),
        cited_in_view=sum(replay.cited_in_view for replay in replays),
        threads_at_or_above_85=sum(replay.at_or_above_85 for replay in replays),
        estimated=summaries > 0,
        evidence_from_previews=sum(replay.evidence_from == "preview" for replay in replays),
    )


def thread_entry(
    thread_id: str, origin: str, current: ThreadReplay, proposed: ThreadReplay
) -> dict[str, Any]:
    """One thread's two replays, as the JSON and the page's chart read them."""

    def side(replay: ThreadReplay) -> dict[str, Any]:
        return {
            "compressions": len(replay.compression_turns),
            "offload_only_passes": len(replay.offload_turns),
            "compression_turns": [turn + 1 for turn in replay.compression_turns],
            "offload_turns": [turn + 1 for turn in replay.offload_turns],
            "input_tokens_total": sum(replay.input_tokens),
            "input_tokens_per_turn": list(replay.input_tokens),
            "end_ratio": replay.end_ratio,
            "evidence_cited": replay.cited_total,
            "evidence_cited_in_view": replay.cited_in_view,
            "evidence_from": replay.evidence_from,
        }

    return {
        "thread_id": thread_id,
        "origin": origin,
        "turns": current.turns,
        "current": side(current),
        "proposed": side(proposed),
    }


@dataclass
class TuningResult:
    """A finished (or stopped) replay of an agent's threads under two settings."""

    agent: str
    current: SideSummary
    proposed: SideSummary
    threads: list[dict[str, Any]]
    threads_listed: int  # the agent's threads
    threads_planned: int  # the ones chosen to replay (all, or the sample)
    sample: int | None = None
    stopped: bool = False
    unreadable: dict[str, int] = field(default_factory=dict)  # error code -> threads
    failed: dict[str, int] = field(default_factory=dict)  # read, but the replay refused: code
    unrestored: int = 0  # offloaded results replayed as their header (original not readable)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "current": self.current.to_dict(),
            "proposed": self.proposed.to_dict(),
            "threads": self.threads,
            "threads_listed": self.threads_listed,
            "threads_planned": self.threads_planned,
            "threads_replayed": self.current.threads,
            "sample": self.sample,
            "stopped": self.stopped,
            "unreadable": dict(self.unreadable),
            "failed": dict(self.failed),
            "unrestored_results": self.unrestored,
            "notes": list(self.notes),
            "config": config_fields(self.proposed.settings),
        }


def _threads(count: int) -> str:
    return f"{count:,} thread" if count == 1 else f"{count:,} threads"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _cost(value: float | None) -> str:
    return "" if value is None else f" (${value:,.2f})"


def comparison_rows(result: TuningResult) -> list[tuple[str, str, str]]:
    """(figure, in force, proposed) rows: what the CLI's table and the page's table show."""
    cur, new = result.current, result.proposed

    def pair(name: str, a: str, b: str) -> tuple[str, str, str]:
        return (name, a, b)

    return [
        pair(
            "summary threshold",
            f"{cur.settings.summary_threshold_k} K",
            f"{new.settings.summary_threshold_k} K",
        ),
        pair(
            "tool result limit",
            f"{cur.settings.tool_result_token_limit:,} tokens",
            f"{new.settings.tool_result_token_limit:,} tokens",
        ),
        pair("messages kept", f"{cur.settings.keep_messages}", f"{new.settings.keep_messages}"),
        pair("compressions", f"{cur.compressions:,}", f"{new.compressions:,}"),
        pair(
            "  per thread",
            f"{cur.compressions_per_thread:.2f}",
            f"{new.compressions_per_thread:.2f}",
        ),
        pair(
            "  per 1,000 turns",
            f"{cur.compressions_per_1000_turns:.1f}",
            f"{new.compressions_per_1000_turns:.1f}",
        ),
        pair(
            "offload-only passes",
            f"{cur.offload_only_passes:,}",
            f"{new.offload_only_passes:,}",
        ),
        pair(
            "input tokens per turn (mean)",
            f"{cur.input_tokens_per_turn_mean:,.0f}",
            f"{new.input_tokens_per_turn_mean:,.0f}",
        ),
        pair(
            "input tokens per turn (p95)",
            f"{cur.input_tokens_per_turn_p95:,}",
            f"{new.input_tokens_per_turn_p95:,}",
        ),
        pair(
            "input tokens in total",
            f"{cur.input_tokens_total:,}{_cost(cur.cost_usd)}",
            f"{new.input_tokens_total:,}{_cost(new.cost_usd)}",
        ),
        pair(
            "cited evidence kept in view",
            _share(cur.evidence_kept_share),
            _share(new.evidence_kept_share),
        ),
        pair(
            "threads at or above 85% at the end",
            f"{cur.threads_at_or_above_85:,}",
            f"{new.threads_at_or_above_85:,}",
        ),
    ]


def summary_lines(result: TuningResult) -> list[str]:
    """The lines around the table: what was replayed, estimates, spread, the fields to copy."""
    replayed = result.current.threads
    scope = (
        f"a stratified sample of {result.threads_planned:,} of {result.threads_listed:,} threads"
        if result.sample is not None
        else f"{result.threads_planned:,} threads"
    )
    lines = [f"agent {result.agent}: replayed {replayed:,} of {scope}"]
    if result.stopped:
        lines.append(f"stopped after {_threads(replayed)}: the figures cover those only")
    for side in (result.current, result.proposed):
        for name, estimate in side.fleet_estimate.items():
            label = "in force" if side is result.current else "proposed"
            lines.append(
                f"fleet estimate ({label}) {name.replace('_', ' ')}: {estimate.value:,.0f} "
                f"± {estimate.plus_minus:,.0f} (approximate 95%)"
            )
    sides = (result.current, result.proposed)
    missing = {h for side in sides for e in side.fleet_estimate.values() for h in e.missing}
    if missing:
        named = ", ".join(f"pressure band {p} by length band {n}" for p, n in sorted(missing))
        lines.append(
            f"the fleet estimates are partial: no thread was replayed from {named}; "
            "they cover the other strata only"
        )
    lines.extend(result.notes)
    previews = result.current.evidence_from_previews + result.proposed.evidence_from_previews
    if previews:
        lines.append(
            "cited evidence of a thread with no summary: what the compress preview of a "
            "summary at its end keeps in view"
        )
    for code, count in sorted(result.unreadable.items()):
        lines.append(f"left out, could not be read ({code}): {_threads(count)}")
    for code, count in sorted(result.failed.items()):
        lines.append(f"left out, could not be replayed ({code}): {_threads(count)}")
    if result.unrestored:
        lines.append(
            f"{result.unrestored:,} offloaded results were replayed as their saved header: "
            "their files are not in this workdir"
        )
    return lines


def config_lines(settings: CompressionSettings) -> list[str]:
    """The proposal as the agent's configuration fields, ready to copy."""
    return [
        f"{name} = {field_['value']}  # {field_['unit']}"
        for name, field_ in config_fields(settings).items()
    ]
