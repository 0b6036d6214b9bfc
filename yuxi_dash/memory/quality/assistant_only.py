"""Assistant-only facts: live facts whose only provenance is assistant or tool text.

Live: no `expired_at`, `forgotten_at` or `invalid_at`; status active, tentative or unset.
An episode's speaker (`episode_speaker`): its JSON envelope's top-level `source_kind`, else
its top-level `role` (a long envelope is read at its top level from both ends; nested keys
never count), else a message's "role: " prefix, else `unknown`; not in the graph: `missing`.
A live fact's basis, the first that holds: `user_asserted` (source kind); `user_episode` (an
episode is the user's words); `operator_corrected` (source kind); `assistant_only`: it has
episodes and every one is verified assistant or tool text, or it has none and its source
kind is assistant_derived or tool_observed; else `unknown`. So a missing, unknown or operator
episode makes a fact `unknown` whatever its kind says: the bulk retract acts on this label.
Share: assistant-only over live facts (None when none). Facts are ordered by `created_at` in
UTC; the preview token names the user, the moment and the uuid set. Every look goes through
`open_view`; the fleet list skips gated-off users unread and audits each user it reads.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from yuxi_dash import validation
from yuxi_dash.access.roles import Actor
from yuxi_dash.errors import InvalidMoment
from yuxi_dash.flags import FlagEvaluator
from yuxi_dash.memory.graph.client import GraphClient, Row
from yuxi_dash.memory.quality import assistant_only_queries as aoq
from yuxi_dash.memory.quality.assistant_only_actions import SCAN_ACTION, VIEW
from yuxi_dash.memory.views.gate import (
    MemoryAccess,
    graph_for,
    look_at_every_user,
    view_refusals,
)
from yuxi_dash.memory.views.gated_views import parse_envelope
from yuxi_dash.memory.views.provenance import episode_words
from yuxi_dash.memory.views.ratification import parse_time
from yuxi_dash.settings import Settings

LIST_LIMIT = 200
MAX_LIST = 500
FLEET_LIMIT = 200
BASES = ("user_asserted", "user_episode", "operator_corrected", "assistant_only", "unknown")
ASSISTANT_KINDS = frozenset({"assistant_derived", "tool_observed"})
_KIND_SPEAKER = {
    "user_asserted": "user",
    "assistant_derived": "assistant",
    "tool_observed": "tool",
    "operator_corrected": "operator",
}
_ROLE_SPEAKER = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
}
_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+)')
_ENVELOPE_KEYS = ("source_kind", "role")


# --- the rule ---------------------------------------------------------------------
def _speaker_of(kind: str | None, role: str | None) -> str:
    if kind and kind in _KIND_SPEAKER:
        return _KIND_SPEAKER[kind]
    return _ROLE_SPEAKER.get((role or "").lower(), "unknown")


def _head_tokens(text: str) -> list[str]:
    """JSON tokens from the start of `text`, up to the first that is cut off."""
    tokens, at = [], 0
    while (hit := _TOKEN.match(text, at)) is not None and hit.end() > at:
        tokens.append(hit.group(1))
        at = hit.end()
    return tokens


def _opening_quote(text: str, end: int) -> int:
    """Where the string closed by the quote at `end` opens; -1 when it opens before `text`."""
    at = end - 1
    while at >= 0:
        if text[at] == '"':
            slashes = 0
            while at - 1 - slashes >= 0 and text[at - 1 - slashes] == "\\":
                slashes += 1
            if at - slashes == 0 and slashes:
                return -1  # the backslashes may go on before the cut: unknown
            if slashes % 2 == 0:
                return at
        at -= 1
    return -1


def _tail_tokens(text: str) -> list[str]:
    """JSON tokens from the end of `text` back, up to the first that is cut off (in order)."""
    tokens: list[str] = []
    at = len(text) - 1
    while at >= 0:
        char = text[at]
        if char.isspace():
            at -= 1
        elif char == '"':
            start = _opening_quote(text, at)
            if start < 0:
                break
            tokens.append(text[start : at + 1])
            at = start - 1
        elif char in "{}[]:,":
            tokens.append(char)
            at -= 1
        else:
            start = at
            while start > 0 and not (text[start - 1].isspace() or text[start - 1] in '{}[]:,"'):
                start -= 1
            if start == 0:
                break  # a literal cut at the start
            tokens.append(text[start : at + 1])
            at = start - 1
    return tokens[::-1]


def _top_level(tokens: list[str], depths: list[int]) -> dict[str, str]:
    """The `"key": "value"` pairs of `tokens` at the outer object's level (depth 1)."""
    found: dict[str, str] = {}
    for i in range(len(tokens) - 2):
        key, colon, value = tokens[i : i + 3]
        if depths[i] == 1 and colon == ":" and key[:1] == '"' and value[:1] == '"':
            try:
                name, text = json.loads(key), json.loads(value)
            except ValueError:
                continue
            found.setdefault(name, text)
    return found


def envelope_keys(head: str, tail: str) -> dict[str, str]:
    """A long JSON envelope's top-level `source_kind` and `role`, read from both ends."""
    tokens = _head_tokens(head)
    depths, depth = [], 0
    for token in tokens:
        depths.append(depth)
        depth += 1 if token in "{[" else -1 if token in "}]" else 0
    found = _top_level(tokens, depths) if tokens[:1] == ["{"] else {}
    tokens = _tail_tokens(tail)
    back: list[int] = []
    depth = 0
    for token in reversed(tokens):
        depth -= 1 if token in "{[" else 0
        back.append(depth)
        depth += 1 if token in "}]" else 0
    if tokens[-1:] == ["}"]:
        for key, value in _top_level(tokens, back[::-1]).items():
            found.setdefault(key, value)
    return {k: v for k, v in found.items() if k in _ENVELOPE_KEYS}


def episode_speaker(source: str | None, head: str, tail: str = "", chars: int | None = None) -> str:
    """Whose words an episode carries: user, assistant, tool, operator or unknown (the rule).

    `head` is the content's opening; when the content is longer (`chars`), `tail` is its end
    and a JSON envelope's `source_kind` and `role` are read from both ends."""
    head = head or ""
    if chars is None or chars <= len(head):
        _body, named_role, kind = episode_words(source, head)
        envelope = parse_envelope(head)
        role = envelope.get("role") if envelope else named_role
        return _speaker_of(kind, str(role) if role else None)
    if head.lstrip().startswith("{"):
        found = envelope_keys(head, tail or "")
        return _speaker_of(found.get("source_kind"), found.get("role"))
    _body, named_role, _kind = episode_words(source, head)
    return _speaker_of(None, named_role)


def classify(source_kind: str | None, speakers: list[str]) -> str:
    """A live fact's basis from its source kind and its episodes' speakers (the rule)."""
    kind = source_kind or ""
    if kind == "user_asserted":
        return "user_asserted"
    if "user" in speakers:
        return "user_episode"
    if kind == "operator_corrected":
        return "operator_corrected"
    if speakers:  # only verified assistant or tool text counts (module doc)
        return "assistant_only" if all(s in ("assistant", "tool") for s in speakers) else "unknown"
    return "assistant_only" if kind in ASSISTANT_KINDS else "unknown"


# --- one user's graph -------------------------------------------------------------------
@dataclass
class AssistantOnly:
    """One user's live facts by basis, and the assistant-only facts themselves."""

    live_facts: int = 0
    by_basis: dict[str, int] = field(default_factory=lambda: dict.fromkeys(BASES, 0))
    facts: list[dict[str, Any]] = field(default_factory=list)  # oldest first

    @property
    def assistant_only(self) -> int:
        return self.by_basis["assistant_only"]

    @property
    def share(self) -> float | None:
        return self.assistant_only / self.live_facts if self.live_facts else None

    def counts(self) -> dict[str, Any]:
        """The keys `memory stats --json` carries."""
        return {
            "assistant_only_share": self.share,
            "assistant_only_facts": self.assistant_only,
            "live_facts": self.live_facts,
            "assistant_only_by_basis": dict(self.by_basis),
        }


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _fact_row(row: Row, speakers: list[str]) -> dict[str, Any]:
    return {
        "uuid": str(row["uuid"]),
        "source": _text(row.get("source")),
        "name": _text(row.get("name")),
        "target": _text(row.get("target")),
        "fact": _text(row.get("fact")),
        "status": _text(row.get("status")),
        "source_kind": _text(row.get("source_kind")),
        "created_at": _text(row.get("created_at")),
        "episode_speakers": ", ".join(speakers) if speakers else "no episodes",
    }


def _order(fact: dict[str, Any]) -> tuple[bool, datetime, str]:
    moment = parse_time(fact["created_at"])  # zone-aware (UTC when the text has none)
    at = moment.astimezone(UTC) if moment is not None else datetime.min.replace(tzinfo=UTC)
    return (moment is not None, at, fact["uuid"])


def _speakers(client: GraphClient, group_id: str, rows: list[Row]) -> dict[str, str]:
    """The speaker of every episode the rows name (absent: not in the graph)."""
    wanted = sorted({str(e) for r in rows for e in (r.get("episodes") or [])})
    return {
        uuid: episode_speaker(o.get("source"), o.get("head") or "", o.get("tail") or "", o["chars"])
        for uuid, o in aoq.episode_openings(client, group_id, wanted).items()
    }


def _counted(client: GraphClient, group_id: str) -> AssistantOnly:
    found = AssistantOnly()
    by_kind = aoq.live_by_source_kind(client, group_id)
    found.live_facts = sum(by_kind.values())
    found.by_basis["user_asserted"] = by_kind.get("user_asserted", 0)
    found.by_basis["operator_corrected"] = by_kind.get("operator_corrected", 0)
    return found


def count_bases(client: GraphClient, group_id: str) -> AssistantOnly:
    """Every live fact by basis, without the facts themselves (grouped reads: the share)."""
    found = _counted(client, group_id)
    groups = aoq.candidate_groups(client, group_id)
    speakers_of = _speakers(client, group_id, groups)
    for group in groups:
        speakers = [speakers_of.get(str(e), "missing") for e in group.get("episodes") or []]
        found.by_basis[classify(group.get("source_kind"), speakers)] += int(group["facts"])
    return found


def measure(client: GraphClient, group_id: str) -> AssistantOnly:
    """Every live fact by basis, and the assistant-only facts oldest first (reads only)."""
    found = _counted(client, group_id)
    rows = aoq.candidates(client, group_id)
    speakers_of = _speakers(client, group_id, rows)
    for row in rows:
        speakers = [speakers_of.get(str(e), "missing") for e in row.get("episodes") or []]
        basis = classify(row.get("source_kind"), speakers)
        found.by_basis[basis] += 1
        if basis == "assistant_only":
            found.facts.append(_fact_row(row, speakers))
    found.facts.sort(key=_order)
    return found


def created_before(facts: list[dict[str, Any]], moment: datetime) -> list[dict[str, Any]]:
    """The facts created strictly before `moment` (a fact without `created_at` never is)."""
    out = []
    for fact in facts:
        at = parse_time(fact.get("created_at"))
        if at is not None and at < moment:
            out.append(fact)
    return out


def parse_moment(value: Any) -> datetime:
    """An ISO 8601 moment ("2026-11-01T00:00:00Z"; without a zone: UTC); InvalidMoment else."""
    text = validation.text(value, "the moment", limit=64).strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = parse_time(text) if text else None
    if moment is None:
        raise InvalidMoment("give the moment as ISO 8601, e.g. 2026-11-01T00:00:00Z")
    return moment


def share_text(value: float | None, *, missing: str = "–") -> str:
    """The share as people read it ("46.2%"); `missing` when no fact is live."""
    return missing if value is None else f"{value * 100:.1f}%"


def preview_token(user_id: str, moment: datetime, uuids: list[str]) -> str:
    """Names the user, the moment and the exact set of facts a preview showed."""
    body = json.dumps([user_id, moment.isoformat(), sorted(uuids)], separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


# --- the views ---------------------------------------------------------------------
def assistant_only_share(
    access: MemoryAccess, *, client: GraphClient | None = None
) -> dict[str, Any]:
    """The share and the counts behind it, for `memory stats` and the overview."""
    client = graph_for(access, client)
    return count_bases(client, access.group_id).counts()


def assistant_only_facts(
    access: MemoryAccess,
    *,
    before: str = "",
    limit: int = LIST_LIMIT,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """The user's assistant-only facts (oldest first, at most `limit`), with the share; with
    `before`, only those created before that moment, and the preview token of that set."""
    client = graph_for(access, client, texts={"before": before}, pages={"limit": limit})
    with_moment = None
    if before.strip():
        with view_refusals(access):
            with_moment = parse_moment(before)
    found = measure(client, access.group_id)
    facts = found.facts if with_moment is None else created_before(found.facts, with_moment)
    shown = min(int(limit), MAX_LIST)
    return {
        "user_id": access.user_id,
        **found.counts(),
        "before": with_moment.isoformat() if with_moment else None,
        "total": len(facts),
        "facts": facts[:shown],
        "preview_token": preview_token(access.user_id, with_moment, [f["uuid"] for f in facts])
        if with_moment
        else None,
    }


def assistant_only_fleet(
    *,
    actor: Actor,
    limit: int = FLEET_LIMIT,
    settings: Settings | None = None,
    evaluator: FlagEvaluator | None = None,
    client: GraphClient | None = None,
) -> dict[str, Any]:
    """Every user graph (up to `limit`) by assistant-only share, highest first (operator+):
    `users` (the rows), `total` (user graphs there are) and `truncated` (total > limit).

    A gated-off user is listed as such and not read; each user read is one audited look
    (`open_view`). A user whose read fails is listed with the error's code."""
    rows, total = look_at_every_user(
        VIEW,
        lambda access, graph: assistant_only_share(access, client=graph),
        actor=actor,
        action=SCAN_ACTION,
        purpose="list every user's assistant-only share",
        limit=limit,
        settings=settings,
        evaluator=evaluator,
        client=client,
    )
    rows.sort(
        key=lambda r: (
            r.get("assistant_only_share") is None,
            -(r.get("assistant_only_share") or 0),
            r["user_id"],
        )
    )
    return {"users": rows, "total": total, "truncated": total > limit}
