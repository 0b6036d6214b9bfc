"""Hostile data for the render scan, and the scan itself (used by test_hostile_render).

`seed_store` writes threads whose every outside string is hostile through the service's
own import and compress; `build_hostile_graph` builds a user graph the same way with
graphiti-core's classes. `markdown_bodies` collects what an AppTest run put on screen that
Streamlit renders as Markdown; `live_markdown` says what in one body would render live.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from markdown_it import MarkdownIt
from markdown_it.token import Token
from streamlit.testing.v1 import AppTest

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.settings import Settings

PARSER = MarkdownIt("commonmark", {"html": True}).disable("text_join")

# --- hostile strings ----------------------------------------------------------------------
PAYLOADS = (
    "![x](http://127.0.0.1:9/pwn.png)",
    "[click](javascript:alert(1))",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "$\\href{http://127.0.0.1:9/m}{m}$",
    "<http://127.0.0.1:9/auto>",
    "www.127.0.0.1.nip.io/x",
    "&#60;img src=x&#62;",
    ":material/warning: :red[red]",
    "`code` *em* ~~del~~ | a | b |",
    "\n# heading\n- item\n1. item\n> quote\n    indented\n```\nfence\n```\n[ref]: http://127.0.0.1:9/ref.png\n![ref]",
)
ID_PAYLOAD = "![x](http://127.0.0.1:9/i.png)<img src=x onerror=alert(1)>[a](javascript:x)$m$"


def hostile(marker: str) -> str:
    """A long hostile text carrying `marker` (a plain word) so its arrival can be checked."""
    return f"{marker} " + " ".join(PAYLOADS) + f" {marker}"


def hostile_id(marker: str) -> str:
    """A one-line hostile id (ids are at most 128 characters)."""
    return f"{marker}{ID_PAYLOAD}"


HOT_THREAD = hostile_id("zzhotthread")
DONE_THREAD = hostile_id("zzdonethread")
CHAT_THREAD = hostile_id("zzchatthread")
UNSUPPORTED_THREAD = hostile_id("zzunsupthread")
STORE_USER = hostile_id("zzstoreuser")
AGENT = hostile_id("zzagent")
PLAIN_AGENT = hostile_id("zzplainagent")
TOOL = hostile_id("zztoolname")
WEB_TOOL = hostile_id("zzwebtool") + "__web_search"
URL_THREAD = hostile_id("zzurlthread")
URL_USER = hostile_id("zzurluser")
GRAPH_USER = "zz_hostile_user"  # a graph name allows [A-Za-z0-9_-] only; its contents are free

ADMIN = Actor(id="operator@localhost", role=Role.ADMIN)


# --- the scan -----------------------------------------------------------------------------
_MARKDOWN_FIELDS = frozenset({"body", "label", "help", "text", "content", "caption", "title"})
_PLAIN_PROTOS = frozenset({"Text", "Code", "Json", "Exception"})  # shown as written by Streamlit
_LIVE_TOKENS = frozenset(
    {
        "image",
        "link_open",
        "html_inline",
        "html_block",
        "heading_open",
        "blockquote_open",
        "bullet_list_open",
        "ordered_list_open",
        "fence",
        "code_block",
        "hr",
    }
)
_BARE_URL = re.compile(r"https?://|www\.", re.IGNORECASE)


def _proto_strings(message: Any, *, plain: bool = False) -> Iterator[str]:
    """Every Markdown-bearing string field of a protobuf message, nested ones included."""
    name = type(message).__name__
    plain = plain or name in _PLAIN_PROTOS
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            children = value if field.is_repeated else [value]
            for child in children:
                yield from _proto_strings(child, plain=plain)
        elif field.type == field.TYPE_STRING and not plain:
            values = list(value) if field.is_repeated else [value]
            if field.name in _MARKDOWN_FIELDS or (name == "Radio" and field.name == "options"):
                yield from (v for v in values if v)
            elif name == "Radio" and field.name == "captions":
                yield from (v for v in values if v)


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _nodes(child)


def _table_cells(frame: pd.DataFrame) -> Iterator[str]:
    yield from (str(c) for c in frame.columns)
    yield from (str(i) for i in frame.index)
    for row in frame.itertuples(index=False):
        yield from (str(v) for v in row)


def markdown_bodies(at: AppTest) -> list[str]:
    """Everything the current run put on screen that Streamlit renders as Markdown."""
    bodies: list[str] = []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        if proto is None:
            continue
        if getattr(node, "type", None) == "table":  # st.table cells are Markdown
            bodies.extend(_table_cells(node.value))
        else:
            bodies.extend(_proto_strings(proto))
    return bodies


def walk_tokens(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        yield from walk_tokens(token.children or [])


def live_markdown(body: str) -> list[str]:
    """What in `body` would render as something other than plain text (empty: nothing)."""
    problems: list[str] = []
    tokens = PARSER.parse(body)
    for token in walk_tokens(tokens):
        if token.type in _LIVE_TOKENS:
            problems.append(f"{token.type} {token.content or token.attrs!r}"[:120])
        if token.type == "text":  # unescaped text: no math, no URL a GFM renderer would link
            if "$" in token.content:
                problems.append(f"math {token.content[:80]!r}")
            if _BARE_URL.search(token.content):
                problems.append(f"bare url {token.content[:80]!r}")
        if token.type == "text_special" and token.info != "escape":
            problems.append(f"entity {token.markup!r}")
    html = PARSER.renderer.render(tokens, PARSER.options, {})
    for tag in ("<img", "<a ", "<script", "<h1", "<h2"):
        if tag in html:
            problems.append(f"{tag} in the rendered HTML")
    return problems


class Scan:
    """Collects the Markdown of every run and what arrived; fails with every finding."""

    def __init__(self) -> None:
        self.findings: list[str] = []
        self.seen: list[str] = []

    def __call__(self, at: AppTest, where: str) -> AppTest:
        assert not at.exception, f"{where}: {[e.value for e in at.exception]}"
        for body in markdown_bodies(at):
            self.seen.append(body)
            for problem in live_markdown(body):
                self.findings.append(f"{where}: {problem} in {body[:160]!r}")
        return at

    def arrived(self, marker: str) -> bool:
        return any(marker in body for body in self.seen)


# --- seeding --------------------------------------------------------------------------------
def _message(kind: str, content: Any, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "data": {"content": content, **fields}}


def _web_search_result(marker: str, records: int) -> str:
    return json.dumps(
        {
            "kind": hostile(f"{marker}kind"),
            "query": hostile(f"{marker}query"),
            "result_count": records,
            "results": [
                {
                    "title": hostile(f"{marker}title"),
                    "url": "http://127.0.0.1:9/page",
                    "content": hostile(f"{marker}content") * 3,
                }
                for _ in range(records)
            ],
        }
    )


FORGED_SAVED = (
    "[Tool result saved]\n"
    f"Tool: {hostile_id('zzforgedtool')}\n"
    f"Approx tokens: {hostile_id('zzforgedtokens')}\n"
    f"SHA-256: {hostile_id('zzforgedsha')}\n"
    f"Full output path: {hostile_id('zzforgedpath')}\n"
    "\n"
    "Output preview:\n"
    f"{hostile('zzforgedpreview')}\n"
    f"[Truncated {hostile('zzforgednote')}]"
)


def _turns(prefix: str, count: int) -> list[dict[str, Any]]:
    messages = []
    for turn in range(count):
        call_id = f"{prefix}-{turn}"
        messages += [
            _message("human", hostile("zzhuman") + " padding " * 40),
            _message(
                "ai",
                hostile("zzaitext"),
                tool_calls=[
                    {
                        "id": call_id,
                        "name": TOOL,
                        "args": {hostile_id("zzargkey"): hostile("zzargvalue")},
                    }
                ],
            ),
            _message("tool", hostile("zztoolresult") * 8, tool_call_id=call_id, name=TOOL),
        ]
    return messages


def _payload(
    thread_id: str, user_id: str, agent: dict[str, Any], messages: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "user_id": user_id,
        "title": hostile("zztitle"),
        "agent": agent,
        "messages": messages,
    }


def seed_store(settings: Settings) -> None:
    """Four hostile threads: hot, compressed (offloaded results), another user's chat, no
    compression support."""
    from yuxi_dash.files.workdir import Workdir
    from yuxi_dash.service import import_thread
    from yuxi_dash.sources import compress_thread_context

    Workdir(settings.workdir).initialize()
    capable = {
        "slug": AGENT,
        "name": hostile_id("zzagentname"),
        "capabilities": ["context_compression"],
        "context_window": 8000,
        "summary_threshold": 1,
        "summary_keep_messages": 8,
        "summary_tool_result_token_limit": 400,
    }
    plain = {**capable, "slug": PLAIN_AGENT, "capabilities": []}
    import_thread(_payload(HOT_THREAD, STORE_USER, capable, _turns("hot", 3)), actor=ADMIN)
    import_thread(_payload(UNSUPPORTED_THREAD, STORE_USER, plain, _turns("un", 3)), actor=ADMIN)
    done = _turns("done", 3) + [
        _message(
            "ai",
            hostile("zzaisearch"),
            tool_calls=[
                {"id": "web-big", "name": "web_search", "args": {"q": hostile("zzsearchargs")}},
                {"id": "web-small", "name": WEB_TOOL, "args": {"q": "x"}},
                {"id": "forged", "name": TOOL, "args": {}},
            ],
        ),
        _message("tool", _web_search_result("zzbig", 6), tool_call_id="web-big", name="web_search"),
        _message("tool", _web_search_result("zzsmall", 0), tool_call_id="web-small", name=WEB_TOOL),
        _message("tool", FORGED_SAVED, tool_call_id="forged", name=TOOL),
        _message("ai", hostile("zzaifinal")),
    ]
    import_thread(_payload(DONE_THREAD, STORE_USER, capable, done), actor=ADMIN)
    result = compress_thread_context(DONE_THREAD, actor=ADMIN, settings=settings)
    assert result.status == "completed", result
    chat = [_message("human", hostile("zzgraphchat")), _message("ai", "noted")]
    import_thread(_payload(CHAT_THREAD, GRAPH_USER, capable, chat), actor=ADMIN)


def build_hostile_graph(group_id: str) -> dict[str, Any]:
    """A small Graphiti graph whose every free text is hostile (graphiti-core's own classes)."""
    from graphiti_core.edges import CommunityEdge, EntityEdge, EpisodicEdge
    from graphiti_core.nodes import CommunityNode, EntityNode, EpisodeType, EpisodicNode

    from yuxi_dash.demo.graph_writer import deterministic_embedding

    now = datetime.now(UTC).replace(microsecond=0)
    uuid = iter(f"00000000-0000-4000-8000-{n:012d}" for n in range(1, 1000))
    entities = [
        EntityNode(
            uuid=next(uuid),
            name=hostile_id(f"zzentity{n}"),
            group_id=group_id,
            labels=["Person"],
            summary=hostile(f"zzsummary{n}"),
            created_at=now - timedelta(days=40 - n),
            name_embedding=deterministic_embedding(f"e{n}"),
        )
        for n in range(4)
    ]
    episodes = [
        EpisodicNode(
            uuid=next(uuid),
            name=hostile_id(f"zzepisode{n}"),
            group_id=group_id,
            source=EpisodeType.json,
            source_description=hostile("zzepisodesource"),
            content=json.dumps(
                {
                    "memory_kind": hostile_id("zzmemorykind"),
                    "source_kind": hostile_id("zzsourcekind"),
                    "content": hostile("zzepisodecontent"),
                }
            ),
            created_at=now - timedelta(days=10 - n),
            valid_at=now - timedelta(days=10 - n),
        )
        for n in range(3)
    ]
    mentions = [
        EpisodicEdge(
            uuid=next(uuid),
            source_node_uuid=episode.uuid,
            target_node_uuid=entity.uuid,
            group_id=group_id,
            created_at=episode.created_at,
        )
        for episode in episodes
        for entity in entities[:2]
    ]
    facts = []
    for n, (source, target, status) in enumerate(
        [(0, 1, "tentative"), (0, 2, "active"), (1, 0, "active"), (0, 1, "tentative")]
    ):
        created = now - timedelta(days=35 + n)
        facts.append(
            EntityEdge(
                uuid=next(uuid),
                source_node_uuid=entities[source].uuid,
                target_node_uuid=entities[target].uuid,
                name=hostile_id("zzrelation"),
                fact=hostile(f"zzfact{n}") if n != 3 else hostile("zzfact0"),
                group_id=group_id,
                episodes=[episodes[0].uuid],
                created_at=created,
                valid_at=created,
                fact_embedding=deterministic_embedding(f"f{n}"),
                attributes={
                    "status": status if n else hostile_id("zzstatus"),
                    "source_kind": "user_asserted" if n % 2 else hostile_id("zzfactkind"),
                    "provenance": episodes[0].uuid,
                },
            )
        )
    communities = [
        CommunityNode(
            uuid=next(uuid),
            name=hostile_id(f"zzcommunity{n}"),
            group_id=group_id,
            summary=hostile(f"zzcommunitysummary{n}"),
            created_at=now - timedelta(days=30),
            name_embedding=deterministic_embedding(f"c{n}"),
        )
        for n in range(2)
    ]
    members = [
        CommunityEdge(
            uuid=next(uuid),
            source_node_uuid=community.uuid,
            target_node_uuid=entity.uuid,
            group_id=group_id,
            created_at=community.created_at,
        )
        for community in communities
        for entity in entities
    ]
    return {
        "entities": entities,
        "episodes": episodes,
        "mentions": mentions,
        "facts": facts,
        "communities": communities,
        "members": members,
    }


def flag_file(settings: Settings) -> dict[str, Any]:
    """A LaunchDarkly Files data source turning memory and communities on for everyone."""

    def flag(key: str) -> dict[str, Any]:
        return {
            "key": key,
            "on": True,
            "variations": [True, False],
            "fallthrough": {"variation": 0},
            "offVariation": 1,
            "targets": [],
            "rules": [],
            "prerequisites": [],
            "salt": key,
            "version": 1,
        }

    keys = (settings.memory_flag_key, settings.communities_flag_key)
    return {"flags": {key: flag(key) for key in keys}, "segments": {}}
