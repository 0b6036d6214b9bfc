"""One fact's provenance in one view: from the fact to the words in the chat it came from.

`fact_provenance(access, fact_uuid)` takes the `MemoryAccess` of
`open_view(user_id, "provenance", ...)` and returns plain JSON-able data:
- the fact, its validity, its source and target, its Redis hits;
- each of its episodes with the user's chat message it came from, never one written after
  the fact or its episode: one holding the episode's words (exact first, the named thread
  next, nearest in time), else the message within a day with most of the fact's key words.
  `match` says only what holds: "exact words" when every key word of the fact is in it,
  else which key words it shares and which it never says; who said it (`said_by_basis`);
- the key words' span there and a link to it; for an invalidated fact, what invalidated it
  and the facts retired with it.
A malformed uuid is `invalid_fact_uuid`, one not in this user's graph `fact_not_found`; both
are audited under the view.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import redis

from yuxi_dash.errors import FactNotFound
from yuxi_dash.memory.graph.client import GraphClient, hits_connection
from yuxi_dash.memory.graph.correction_rules import fact_uuid as check_fact_uuid
from yuxi_dash.memory.views import provenance_queries as pq
from yuxi_dash.memory.views.chat_compare import STOPWORDS, words
from yuxi_dash.memory.views.gate import MemoryAccess, graph_for, view_refusals
from yuxi_dash.memory.views.gated_views import parse_envelope
from yuxi_dash.memory.views.ratification import parse_time, read_hits
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.history import messages_containing, messages_near, thread_exists

THREAD_PAGE = "app_pages/thread_detail.py"
_THREAD_HINT = re.compile(r"thread\s+(\S+)", re.IGNORECASE)
_ROLE_PREFIX = re.compile(r"^(user|human|assistant|ai|tool|system)\s*:\s*", re.IGNORECASE)
_KEY_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]{2,}")
_ROLES = {
    "human": "user",
    "user": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
}
_KIND_ROLES = {"user_asserted": "user", "assistant_derived": "assistant", "tool_observed": "tool"}


# --- the words ----------------------------------------------------------------
def episode_words(source: str | None, content: str) -> tuple[str, str | None, str | None]:
    """(the words an episode carries, the role its text names, its envelope's source_kind)."""
    envelope = parse_envelope(content)
    if envelope is not None:
        kind = envelope.get("source_kind")
        return str(envelope.get("content", "")), None, str(kind) if kind else None
    prefix = _ROLE_PREFIX.match(content or "")
    if prefix and (source or "message") == "message":
        return content[prefix.end() :], _ROLES.get(prefix.group(1).lower()), None
    return content or "", None, None


def thread_hint(source_description: str | None) -> str | None:
    """The thread an episode names ("chat thread <id>"), if any."""
    found = _THREAD_HINT.search(source_description or "")
    return found.group(1).rstrip(".,;") if found else None


def key_words(fact: str, *, exclude: set[str]) -> list[str]:
    """The fact's key words in order, once each (lower-case)."""
    out: list[str] = []
    for word in _KEY_WORD.findall(fact or ""):
        low = word.lower()
        if low not in STOPWORDS and low not in exclude and low not in out:
            out.append(low)
    return out


def _stem(word: str) -> str:
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(word) - len(suffix) >= 4 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def spans(text: str, terms: list[str]) -> list[dict[str, Any]]:
    """The first occurrence of each term (or a word sharing its stem) in `text`, by offset."""
    found: list[dict[str, Any]] = []
    for term in terms:
        pattern = re.compile(r"\b" + re.escape(_stem(term)) + r"[\w'-]*", re.IGNORECASE)
        hit = pattern.search(text or "")
        if hit:
            found.append(
                {"word": hit.group(0), "term": term, "start": hit.start(), "end": hit.end()}
            )
    return sorted(found, key=lambda s: s["start"])


def _distance(message: dict[str, Any], moment: datetime | None) -> float:
    at = message.get("created_at")
    if moment is None or not isinstance(at, datetime):
        return 0.0
    return abs((at - moment).total_seconds())


def pick_message(
    candidates: list[dict[str, Any]], passage: str, thread: str | None, moment: datetime | None
) -> dict[str, Any] | None:
    """Exact text first, then the episode's thread, then the nearest in time."""
    if not candidates:
        return None
    wanted = passage.strip().lower()
    return min(
        candidates,
        key=lambda m: (
            (m["content"] or "").strip().lower() != wanted,
            m["thread_id"] != thread,
            _distance(m, moment),
            m["sequence"],
        ),
    )


def _best_by_terms(
    candidates: list[dict[str, Any]], terms: list[str], moment: datetime | None
) -> dict[str, Any] | None:
    scored = [(len(spans(m["content"] or "", terms)), m) for m in candidates]
    scored = [(n, m) for n, m in scored if terms and n * 2 >= len(terms)]
    if not scored:
        return None
    return min(scored, key=lambda pair: (-pair[0], _distance(pair[1], moment)))[1]


# --- the view -------------------------------------------------------------------
def _display_name(user_id: str) -> str:
    return " ".join(p.capitalize() for p in user_id.replace("-", "_").split("_") if p)


def _message_view(message: dict[str, Any], terms: list[str]) -> dict[str, Any]:
    found = spans(message["content"] or "", terms)
    at = message.get("created_at")
    return {
        "thread_id": message["thread_id"],
        "sequence": message["sequence"],
        "role": message["role"],
        "created_at": at.isoformat() if isinstance(at, datetime) else at,
        "content": message["content"],
        "spans": found,
        "span": {"start": found[0]["start"], "end": max(s["end"] for s in found)}
        if found
        else None,
        "link": {
            "page": THREAD_PAGE,
            "query": {"thread": message["thread_id"], "message": str(message["sequence"])},
        },
    }


def _bound(fact_created: Any, row: dict[str, Any]) -> datetime | None:
    """The latest a source message can be written: when the fact was created, else (a fact
    without a time) when its episode was."""
    return (
        parse_time(fact_created)
        or parse_time(row.get("created_at"))
        or parse_time(row.get("valid_at"))
    )


def _listed(terms: list[str]) -> str:
    return ", ".join(terms)


def describe_match(
    content: str, terms: list[str], *, episode_text: bool
) -> tuple[str, str, list[str], list[str]]:
    """(label, kind, shared key words, missing key words) of a message found for a fact.

    "exact words" only when the message holds the episode's text and every key word of
    the fact; otherwise the label says what matched and what the message never says.
    """
    found = {s["term"] for s in spans(content, terms)}
    shared = [t for t in terms if t in found]
    missing = [t for t in terms if t not in found]
    if episode_text and terms and not missing:
        return "exact words", "exact_words", shared, missing
    if episode_text:
        label = "the episode's own text"
        if not terms:
            label += " (the fact has no key words to look for)"
        elif not shared:
            label += f", which has none of the fact's key words ({_listed(missing)})"
        elif missing:
            label += f", which shares {_listed(shared)} but never says {_listed(missing)}"
        return label, "episode_text", shared, missing
    label = f"shares the words {_listed(shared)} (a message near the episode's time)"
    if missing:
        label += f"; never says {_listed(missing)}"
    return label, "shared_words", shared, missing


def _trace_episode(
    access: MemoryAccess,
    row: dict[str, Any],
    terms: list[str],
    session: Any,
    fact_created: Any = None,
) -> dict[str, Any]:
    body, named_role, kind = episode_words(row.get("source"), row.get("content") or "")
    thread = thread_hint(row.get("source_description"))
    if thread is not None and not thread_exists(session, access.user_id, thread):
        thread = None
    moment = parse_time(row.get("valid_at")) or parse_time(row.get("created_at"))
    until = _bound(fact_created, row)
    exact = messages_containing(session, access.user_id, body, until=until)
    message = pick_message(exact, body, thread, moment)
    episode_text = message is not None
    if message is None and moment is not None:
        near = messages_near(session, access.user_id, moment, thread_id=thread, until=until)
        message = _best_by_terms(near, terms, moment)
    match = (
        describe_match(message["content"] or "", terms, episode_text=episode_text)
        if message
        else None
    )
    said_by = _ROLES.get(str(message["role"]).lower()) if message else None
    said_by = said_by or named_role or _KIND_ROLES.get(kind or "")
    return {
        "uuid": row["uuid"],
        "name": row.get("name"),
        "source": row.get("source"),
        "source_description": row.get("source_description"),
        "created_at": row.get("created_at"),
        "valid_at": row.get("valid_at"),
        "source_kind": kind,
        "body": body,
        "content_chars": row.get("content_chars"),
        "thread_hint": thread,
        "message": _message_view(message, terms) if message else None,
        "match": match[0] if match else None,
        "match_kind": match[1] if match else None,
        "shared_words": match[2] if match else [],
        "missing_words": match[3] if match else [],
        "not_after": until.isoformat() if until else None,
        "said_by": said_by,
        "said_by_basis": "chat message role"
        if message
        else ("episode role" if named_role else ("episode source_kind" if kind else None)),
    }


def hits_conn_for(settings: Settings, client: GraphClient) -> redis.Redis:
    """The hit counters' connection: on the client's own FalkorDB server when no
    YUXI_DASH_REDIS_URL is set (no second server lookup), else `hits_connection`."""
    if settings.redis_url or client.handle is None:
        return hits_connection(settings)
    # retry=None: a timed-out write must never be sent twice (see memory.graph.client).
    return redis.Redis(**client.handle.redis_kwargs(), socket_timeout=5, retry=None)  # type: ignore[arg-type]


def _hits(access: MemoryAccess, client: GraphClient, fact: str, conn: redis.Redis | None) -> int:
    own = conn is None
    conn = conn or hits_conn_for(access.settings, client)
    try:
        return read_hits(conn, access.user_id, [fact]).get(fact, 0)
    finally:
        if own:
            conn.close()


def _invalidation(
    client: GraphClient, access: MemoryAccess, fact: dict[str, Any], row: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    props = row["props"]
    by: dict[str, Any] | None = None
    successor = props.get("superseded_by")
    if successor:
        found = pq.fact_summary(client, access.group_id, str(successor))
        if found:
            by = {**found, "how": "superseded_by"}
    if by is None and props.get("invalid_at"):
        newer = pq.invalidated_by(
            client,
            access.group_id,
            fact_uuid=fact["uuid"],
            source=row["source_uuid"],
            target=row["target_uuid"],
            name=fact["name"] or "",
            invalid_at=str(props["invalid_at"]),
        )
        if newer:
            by = {**newer[0], "how": "newer fact on the same source, name and target"}
    if by is not None:
        episodes = list(by.get("episodes") or [])
        found_eps = pq.episodes_by_uuid(client, access.group_id, episodes[:1])
        first = found_eps.get(episodes[0]) if episodes else None
        by["episode"] = (
            {k: first.get(k) for k in ("uuid", "name", "source_description", "created_at")}
            if first
            else None
        )
    batch: list[dict[str, Any]] = []
    if props.get("expired_at"):
        batch = pq.same_batch(
            client,
            access.group_id,
            fact_uuid=fact["uuid"],
            nodes=[row["source_uuid"], row["target_uuid"]],
            expired_at=str(props["expired_at"]),
        )
    return by, batch


def fact_provenance(
    access: MemoryAccess,
    fact_uuid: str,
    *,
    client: GraphClient | None = None,
    hits_conn: redis.Redis | None = None,
) -> dict[str, Any]:
    """Everything about where one fact of this user's memory came from (see the module doc)."""
    with view_refusals(access):
        wanted = check_fact_uuid(fact_uuid)
        client = graph_for(access, client)
        row = pq.fact_by_uuid(client, access.group_id, wanted)
        if row is None:
            raise FactNotFound(f"no fact {wanted} in {access.user_id}'s memory")
    props = row["props"]
    fact = {
        "uuid": props.get("uuid"),
        "name": props.get("name"),
        "fact": props.get("fact"),
        "status": props.get("status"),
        "source_kind": props.get("source_kind"),
        "created_at": props.get("created_at"),
        "valid_at": props.get("valid_at"),
        "invalid_at": props.get("invalid_at"),
        "expired_at": props.get("expired_at"),
        "episodes": list(props.get("episodes") or []),
        "attributes": {
            k: v
            for k, v in props.items()
            if k
            not in {"uuid", "name", "fact", "group_id", "episodes", "created_at", "valid_at"}
            | {"invalid_at", "expired_at", "source_node_uuid", "target_node_uuid"}
        },
    }
    exclude = words(_display_name(access.user_id))
    terms = key_words(fact["fact"] or "", exclude=exclude)
    episode_rows = pq.episodes_by_uuid(client, access.group_id, fact["episodes"])
    with session_scope(access.settings) as session:
        traced = [
            _trace_episode(access, episode_rows[uuid], terms, session, fact["created_at"])
            if uuid in episode_rows
            else {"uuid": uuid, "missing": True, "message": None, "said_by": None}
            for uuid in fact["episodes"][: pq.MAX_EPISODES]
        ]
    invalidated_by, same_batch = _invalidation(client, access, fact, row)
    return {
        "user_id": access.user_id,
        "group_id": access.group_id,
        "fact": fact,
        "source": {
            "uuid": row["source_uuid"],
            "name": row["source_name"],
            "labels": row["source_labels"],
        },
        "target": {
            "uuid": row["target_uuid"],
            "name": row["target_name"],
            "labels": row["target_labels"],
        },
        "key_words": terms,
        "hits": _hits(access, client, wanted, hits_conn),
        "episodes": traced,
        "invalidated_by": invalidated_by,
        "same_batch": same_batch,
    }
