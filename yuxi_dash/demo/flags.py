"""The demo's LaunchDarkly flags: a Files data source that gates some demo users off.

Owns `demo_flags` (memory on for every user but every 7th, communities on for
half of them) and the flag file that ships with the package, `DEMO_FLAGS_FILE`
(`yuxi_dash/demo/flags.json`), which `yuxi-dash serve --demo` reads unless
`LAUNCHDARKLY_SDK_KEY` or `YUXI_DASH_LD_FLAGS_FILE` says otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yuxi_dash.memory.views.gate import DEMO_FLAGS_FILE  # named where the gate message says it

__all__ = ["DEMO_FLAGS_FILE", "demo_flags", "write_demo_flags"]


def demo_flags(user_ids: Sequence[str]) -> dict[str, Any]:
    """A LaunchDarkly Files data source: memory on except every 7th user, communities for half."""
    gated_off = [u for i, u in enumerate(user_ids) if i % 7 == 3]
    communities_on = [u for i, u in enumerate(user_ids) if i % 2 == 0]
    return {
        "flags": {
            "graphiti-memory": _flag("graphiti-memory", [], gated_off, default=True),
            "graphiti-communities-enabled": _flag(
                "graphiti-communities-enabled", communities_on, [], default=False
            ),
        },
        "segments": {},
    }


def _flag(
    key: str, targets_true: list[str], targets_false: list[str], *, default: bool
) -> dict[str, Any]:
    """One boolean flag: these users true, those false, everyone else `default`."""
    targets = []
    if targets_true:
        targets.append({"values": targets_true, "variation": 0})
    if targets_false:
        targets.append({"values": targets_false, "variation": 1})
    return {
        "key": key,
        "on": True,
        "variations": [True, False],
        "targets": targets,
        "contextTargets": [],
        "rules": [],
        "prerequisites": [],
        "fallthrough": {"variation": 0 if default else 1},
        "offVariation": 1,
        "salt": f"yuxi-demo-{key}",
        "version": 1,
        "trackEvents": False,
        "clientSide": False,
    }


def write_demo_flags(user_ids: Sequence[str], path: Path) -> Path:
    """Write the demo flag file for `user_ids` to `path` (the shipped one is DEMO_FLAGS_FILE)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(demo_flags(list(user_ids)), indent=2) + "\n")
    return path
