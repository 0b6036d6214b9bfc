"""Whether a community rebuild would run now, and why not.

Skipped when the user has no episodes, no new episodes since the latest
Community.created_at, or fewer new episodes than
GRAPHITI_COMMUNITY_REBUILD_MIN_NEW_EPISODES (5). A graph with episodes and no
communities yet would build them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Reason = Literal["no_episodes", "no_new_episodes", "below_threshold", "first_build", "enough_new"]


@dataclass(frozen=True)
class RebuildDecision:
    would_run: bool
    reason: Reason
    message: str
    episodes: int
    new_episodes: int
    last_built_at: str | None
    threshold: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def rebuild_decision(
    *, episodes: int, new_episodes: int, last_built_at: str | None, threshold: int
) -> RebuildDecision:
    def decide(would_run: bool, reason: Reason, message: str) -> RebuildDecision:
        return RebuildDecision(
            would_run, reason, message, episodes, new_episodes, last_built_at, threshold
        )

    if episodes == 0:
        return decide(False, "no_episodes", "skipped: the user has no episodes")
    if last_built_at is None:
        return decide(True, "first_build", f"would run: {episodes} episodes and no communities yet")
    if new_episodes == 0:
        return decide(False, "no_new_episodes", "skipped: no new episodes since the last build")
    if new_episodes < threshold:
        return decide(
            False,
            "below_threshold",
            f"skipped: {new_episodes} new episode(s) since the last build, fewer than {threshold}",
        )
    return decide(
        True,
        "enough_new",
        f"would run: {new_episodes} new episodes since the last build (threshold {threshold})",
    )
