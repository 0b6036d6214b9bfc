"""Hostile text through every page: nothing a user, model, tool, graph or URL wrote renders live.

A store and a user graph are seeded so that every string an outsider controls is hostile:
thread and user ids, agent slugs, messages, tool names, tool-call arguments, tool results
(a web_search JSON with a hostile query and kind, a forged "[Tool result saved]" header),
entity names and summaries, facts, relation names, community names and summaries, episodes,
and the `?thread=` / `?user=` URL parameters. Every page then runs in Streamlit's AppTest, and
every element Streamlit renders as Markdown (bodies, captions, alerts, titles, widget labels,
help tooltips, expander and tab labels, metric labels and values, progress text, pills and
radio options, st.table cells) is rendered with markdown-it-py in CommonMark mode with HTML
on. The test fails on any image, link, raw HTML, math (`$`), bare URL (GitHub-flavoured
Markdown links those), heading, list, quote or code block in that Markdown, and checks that
every hostile field did reach a Markdown element, so the scan cannot pass by missing it.

The same hostile store and graph are then served by `yuxi-dash serve` and opened in headless
Chromium: Streamlit's own renderer (GitHub-flavoured Markdown with autolinks, math, directives)
must draw no image, link, script or math from them, and the browser must request nothing from a
hostile host.

A static check keeps it that way on paths no seed reaches: in the pages, app.py and the ui
package, every Markdown-bearing argument is a constant or built by `md` / `literal` / `code`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from tests.fixtures.profiles import examples
from tests.security.hostile_world import (
    CHAT_THREAD,
    DONE_THREAD,
    GRAPH_USER,
    HOT_THREAD,
    PARSER,
    PAYLOADS,
    UNSUPPORTED_THREAD,
    URL_THREAD,
    URL_USER,
    Scan,
    build_hostile_graph,
    flag_file,
    hostile_id,
    live_markdown,
    seed_store,
    walk_tokens,
)
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.ui.page_text import WORD_JOINER, code, highlighted, markdown_literal, md

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app.py"


@pytest.fixture
def hostile_world(
    isolated_settings: Path,
    falkordb_server: Any,
    memory_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Settings]:
    """The hostile store (this test's SQLite) and graph (the session's FalkorDB), memory on."""
    from tests.fixtures.graph import make_client
    from yuxi_dash.demo.graph_writer import create_indexes, write_graph
    from yuxi_dash.memory.graph.groups import derive_group_id
    from yuxi_dash.ui.loaders import clear_loaders
    from yuxi_dash.ui.memory import clear_memory_caches

    flags = tmp_path / "flags.json"
    flags.write_text(json.dumps(flag_file(get_settings())))
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(flags))
    get_settings.cache_clear()
    settings = get_settings()
    seed_store(settings)
    group_id = derive_group_id(GRAPH_USER)
    client = make_client(falkordb_server, settings)
    try:
        if client.graph_exists(group_id):
            client.delete_graph(group_id)
        create_indexes(client, group_id)
        write_graph(client, group_id, **build_hostile_graph(group_id))
        clear_loaders()
        clear_memory_caches()
        yield settings
    finally:
        client.delete_graph(group_id)  # other tests of the session count the user graphs
        client.close()
        clear_memory_caches()


# --- the pages ------------------------------------------------------------------------------
def _app(page: str, **query: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    for key, value in query.items():
        at.query_params[key] = value
    at.switch_page(page).run()
    return at


def _memory(page: str, *, user: str | None = GRAPH_USER, **state: Any) -> AppTest:
    from yuxi_dash.ui.memory import clear_memory_caches

    clear_memory_caches()
    at = AppTest.from_file(str(REPO / "app_pages" / page), default_timeout=60)
    if user is not None:
        at.query_params["user"] = user
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def _tool_result_ids() -> list[int]:
    import sqlalchemy as sa

    from yuxi_dash.store.db import session_scope
    from yuxi_dash.store.models import ToolResult

    with session_scope(get_settings()) as session:
        return list(session.scalars(sa.select(ToolResult.id).order_by(ToolResult.id)))


def _scan_operations(scan: Scan) -> None:
    scan(_app("app_pages/overview.py"), "overview")
    at = scan(_app("app_pages/threads.py"), "threads")
    at.selectbox(key="compress_thread").set_value(UNSUPPORTED_THREAD).run()
    scan(at, "threads: an unsupported thread picked")
    at.selectbox(key="compress_thread").set_value(HOT_THREAD).run()
    at.button(key="compress_one").click().run()
    scan(at, "threads: the compress dialog")
    at.button(key="confirm_compress").click().run()
    scan(at, "threads: after the compress")
    for thread_id in (HOT_THREAD, DONE_THREAD, CHAT_THREAD, UNSUPPORTED_THREAD):
        at = _app("app_pages/thread_detail.py", thread=thread_id)
        shown = at.number_input[0]
        shown.set_value(shown.max).run()  # every model-visible message
        scan(at, f"thread detail {thread_id[:16]}")
    scan(_app("app_pages/thread_detail.py", thread=URL_THREAD), "thread detail ?thread=")
    at = scan(_app("app_pages/tool_results.py"), "tool results")
    for result_id in _tool_result_ids():
        at.selectbox(key="tool_result_id").set_value(result_id).run()
        scan(at, f"tool result {result_id}")
    scan(_app("app_pages/audit.py"), "audit")
    scan(_app("app_pages/compression_quality.py"), "compression quality")


MEMORY_PAGES = (
    "memory_overview.py",
    "memory_entities.py",
    "memory_facts.py",
    "memory_ratification.py",
    "memory_communities.py",
    "memory_episodes.py",
    "memory_chat.py",
    "memory_warm_context.py",
)


def _scan_memory(scan: Scan) -> None:
    for page in MEMORY_PAGES:
        scan(_memory(page, user=URL_USER), f"{page} ?user=")
        scan(_memory(page), page)
    at = _memory("memory_overview.py")
    at.button[0].click().run()  # the full index check
    scan(at, "memory overview: full check")
    for button in at.button:
        if button.label == "Scan every user graph":
            button.click().run()
    scan(at, "memory overview: every graph")
    at = _memory("memory_entities.py")
    picker = next(s for s in at.selectbox if s.label == "Entity")
    for uuid in picker.options:
        next(s for s in at.selectbox if s.label == "Entity").set_value(uuid).run()
        scan(at, f"entity {uuid}")
    scan(_memory("memory_warm_context.py", warm_query=hostile_id("zzwarmquery")), "warm context")


ARRIVES = (  # every hostile field must reach some Markdown element (else the scan proves nothing)
    "zzhotthread",
    "zzdonethread",
    "zzurlthread",
    "zzstoreuser",
    "zzagent",
    "zzplainagent",
    "zztoolname",
    "zzwebtool",
    "zzsmallkind",
    "zzsmallquery",
    "zzbigquery",
    "zzforgedtool",
    "zzforgedtokens",
    "zzforgedpath",
    "zzforgednote",
    "zzhuman",
    "zzaitext",
    "zzaifinal",
    "zzentity0",
    "zzsummary0",
    "zzcommunity0",
    "zzcommunitysummary0",
    "zzgraphchat",
    "operator@localhost",
)


def test_no_page_renders_hostile_text_as_live_markdown(hostile_world: Settings) -> None:
    scan = Scan()
    _scan_operations(scan)
    _scan_memory(scan)
    missing = [marker for marker in ARRIVES if not scan.arrived(marker)]
    findings = list(dict.fromkeys(scan.findings))
    assert not findings, f"{len(findings)} live Markdown findings:\n" + "\n".join(findings)
    assert not missing, f"these hostile fields never reached a Markdown element: {missing}"


# --- the escaper itself ----------------------------------------------------------------------
def _shown_text(markdown: str) -> str:
    """The plain text CommonMark shows for `markdown`; fails on anything but text and breaks."""
    paragraphs = []
    for token in PARSER.parse(markdown):
        if token.type in ("paragraph_open", "paragraph_close"):
            continue
        assert token.type == "inline", (token.type, markdown)
        parts = []
        for child in token.children or []:
            if child.type == "text" or (child.type == "text_special" and child.info == "escape"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append("\n")
            else:
                raise AssertionError((child.type, markdown))
        paragraphs.append("".join(parts))
    return "\n".join(paragraphs).replace(WORD_JOINER, "")


def _lines(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.strip(" \t") for line in text.split("\n") if line.strip(" \t"))


MARKDOWN_PIECES = [*"ab1 \t\n\r\\`*_{}[]()#+-.!|<>~$:&;=\"'/@^%", *PAYLOADS]
MARKDOWN_PIECES += ["http://", "www.", "&amp;", "&#60;", "1. ", "2) ", "    ", "- ", "```"]


@settings(max_examples=examples(400))
@given(st.lists(st.sampled_from(MARKDOWN_PIECES), max_size=30).map("".join))
def test_markdown_literal_shows_any_text_as_written(text: str) -> None:
    """CommonMark renders the escaped text as exactly the text (blank lines aside), nothing else."""
    assert _lines(_shown_text(markdown_literal(text))) == _lines(text)
    assert not live_markdown(markdown_literal(text))


def _shown_with_bold(markdown: str) -> tuple[str, list[str]]:
    """The plain text CommonMark shows, and the bold runs; fails on anything else."""
    shown: list[str] = []
    bold: list[str] = []
    depth = 0
    for token in PARSER.parse(markdown):
        if token.type in ("paragraph_open", "paragraph_close"):
            continue
        assert token.type == "inline", (token.type, markdown)
        for child in token.children or []:
            if child.type == "strong_open":
                depth += 1
                bold.append("")
            elif child.type == "strong_close":
                depth -= 1
            elif child.type == "text" or (child.type == "text_special" and child.info == "escape"):
                shown.append(child.content)
                if depth:
                    bold[-1] += child.content
            elif child.type in ("softbreak", "hardbreak"):
                shown.append("\n")
            else:
                raise AssertionError((child.type, markdown))
        shown.append("\n")
    return "".join(shown).replace(WORD_JOINER, ""), [b.replace(WORD_JOINER, "") for b in bold]


@settings(max_examples=examples(400))
@given(
    st.lists(st.sampled_from(MARKDOWN_PIECES), max_size=30).map("".join),
    st.lists(st.tuples(st.integers(0, 80), st.integers(0, 80)), max_size=4),
)
def test_highlighted_shows_any_text_as_written_with_only_bold_added(
    text: str, spans: list[tuple[int, int]]
) -> None:
    """The words behind a fact are bold; the message around them still shows exactly as written."""
    built = highlighted(text, spans)
    shown, _bold = _shown_with_bold(built)
    assert _lines(shown) == _lines(text)
    assert not live_markdown(built)
    assert highlighted(text, []) == markdown_literal(text)


def test_highlighted_makes_the_span_bold() -> None:
    text = "I moved to Berlin_now [x](http://127.0.0.1:9/p) last *week*"
    start = text.index("Berlin")
    shown, bold = _shown_with_bold(highlighted(text, [(start, start + 6), (start + 2, start + 4)]))
    assert bold == ["Berlin"]
    assert _lines(shown) == _lines(text)


def test_md_and_code_keep_values_literal() -> None:
    value = "![x](http://127.0.0.1:9/p.png) `tick` <b>"
    built = md("User **{}** · {:,} facts · {}", value, 12345, code(value))
    assert not live_markdown(built)
    tokens = list(walk_tokens(PARSER.parse(built)))
    assert [t.content for t in tokens if t.type == "code_inline"] == [value]
    assert "12,345 facts" in built and "**" in built  # the template's own Markdown stays
    spans = [t for t in walk_tokens(PARSER.parse(code("a\n\n![x](u)"))) if t.type != "text"]
    assert [t.type for t in spans] == ["paragraph_open", "inline", "code_inline", "paragraph_close"]
    assert code("") == ""
    with pytest.raises(ValueError, match="right after a value"):
        md("{}(x)", "a")
    with pytest.raises(ValueError, match="backticks"):
        md("`{}`", "a")


# --- no page can forget it ---------------------------------------------------------------------
SAFE_BUILDERS = frozenset(
    {"md", "literal", "code", "markdown_literal", "highlighted", "MarkdownSafe"}
)
FIRST_ARG_CALLS = frozenset(
    {
        "markdown",
        "caption",
        "error",
        "warning",
        "info",
        "success",
        "toast",
        "title",
        "header",
        "subheader",
        "write",
        "expander",
        "popover",
        "status",
        "button",
        "download_button",
        "link_button",
        "checkbox",
        "toggle",
        "radio",
        "selectbox",
        "multiselect",
        "slider",
        "select_slider",
        "text_input",
        "text_area",
        "number_input",
        "date_input",
        "time_input",
        "file_uploader",
        "color_picker",
        "pills",
        "segmented_control",
        "metric",
        "spinner",
    }
)
MARKDOWN_KEYWORDS = frozenset({"label", "help", "body"})
UI_FILES = sorted(
    [*REPO.glob("app_pages/*.py"), APP, *(REPO / "yuxi_dash" / "ui").rglob("*.py")],
)
# identity.py belongs to the sign-in work; its refusal lines are checked there.
LINTED = [p for p in UI_FILES if p.name != "identity.py"]


def _safe(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, str)
    if isinstance(node, ast.IfExp):
        return _safe(node.body) and _safe(node.orelse)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        return name in SAFE_BUILDERS
    if isinstance(node, ast.List | ast.Tuple):
        return all(_safe(e) for e in node.elts)
    return False


def _unsafe_arguments(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        name = node.func.attr
        checked: list[ast.expr] = []
        if name in FIRST_ARG_CALLS and node.args:
            checked.append(node.args[0])
        if name == "write":
            checked.extend(node.args[1:])
        if name == "tabs" and node.args:
            checked.append(node.args[0])
        if name in ("progress", "update"):
            checked.extend(k.value for k in node.keywords if k.arg == "text")
        checked.extend(k.value for k in node.keywords if k.arg in MARKDOWN_KEYWORDS)
        if name in ("pills", "radio", "segmented_control"):
            format_func = [k.value for k in node.keywords if k.arg == "format_func"]
            if not format_func or not _safe_formatter(format_func[0]):
                yield node.lineno, f"{name} options are Markdown: format_func=literal"
        for arg in checked:
            if not _safe(arg):
                yield node.lineno, f"{name}({ast.unparse(arg)[:60]})"


def _safe_formatter(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in SAFE_BUILDERS
    return isinstance(node, ast.Lambda) and _safe(node.body)


@pytest.mark.parametrize("path", LINTED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_markdown_argument_is_built_literally(path: Path) -> None:
    """Labels, bodies and tooltips are constants or built by md/literal/code: never raw text."""
    found = [
        f"{path.name}:{line} {what}"
        for line, what in _unsafe_arguments(ast.parse(path.read_text()))
    ]
    assert not found, "Markdown built from unescaped values:\n" + "\n".join(found)


# --- the same text in a real browser ------------------------------------------------------------
BROWSER_PAGES = (  # (path, a text that shows the hostile content was drawn)
    (f"thread_detail?thread={quote(DONE_THREAD, safe='')}", "zzstoreuser"),
    (f"thread_detail?thread={quote(URL_THREAD, safe='')}", "thread_not_found"),
    ("tool_results", "What the model sees"),
    (f"memory_communities?user={GRAPH_USER}", "zzcommunity0"),
    (f"memory_chat?user={GRAPH_USER}", "zzgraphchat"),
)
BROWSER_PICKS = {"tool_results": "Open"}  # a page that opens nothing until its selectbox is picked
_DOM_PROBE = """() => ({
  images: [...document.querySelectorAll('img')].map(i => i.getAttribute('src') || ''),
  links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href') || ''),
  math: document.querySelectorAll('.katex, math').length,
  scripts: [...document.querySelectorAll('script')].filter(s => s.text.includes('alert')).length,
  headings: [...document.querySelectorAll('h1, h2, h3, h4, h5, h6')].map(h => h.innerText),
})"""
_HOSTILE_URL = re.compile(r"127\.0\.0\.1:9|nip\.io|javascript:|^x$", re.IGNORECASE)


@pytest.mark.browser
def test_hostile_text_stays_text_in_chromium(
    hostile_world: Settings, falkordb_dir: Path, tmp_path: Path
) -> None:
    """Streamlit's own renderer (GitHub-flavoured Markdown, math, directives): no image, link,
    script or math appears, and the browser asks no hostile host for anything."""
    from playwright.sync_api import expect, sync_playwright

    from tests.fixtures.live_server import dashboard_env, launch_chromium, serve_dashboard

    env = dashboard_env(
        tmp_path,
        YUXI_DASH_DATABASE_URL=hostile_world.database_url,
        YUXI_DASH_WORKDIR=str(hostile_world.workdir),
        YUXI_DASH_FALKORDB_DIR=str(falkordb_dir),
        YUXI_DASH_LD_FLAGS_FILE=str(tmp_path / "flags.json"),
    )
    requested: list[str] = []
    findings: list[str] = []
    with serve_dashboard(tmp_path, env) as url, sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.on("request", lambda request: requested.append(request.url))
            for path, drawn in BROWSER_PAGES:
                page.goto(f"{url}/{path}")
                if path in BROWSER_PICKS:  # open the newest, as an operator does: by picking it
                    label = page.get_by_text(BROWSER_PICKS[path], exact=True)
                    picker = page.get_by_test_id("stSelectbox").filter(has=label)
                    picker.click(timeout=60_000)
                    page.get_by_role("option").first.click()
                expect(page.get_by_text(drawn).first).to_be_attached(timeout=60_000)
                for tab in page.get_by_role("tab").all():  # draw every tab's content
                    tab.click()
                page.wait_for_timeout(500)
                dom = page.evaluate(_DOM_PROBE)
                findings += [f"{path}: image {s}" for s in dom["images"] if _HOSTILE_URL.search(s)]
                findings += [f"{path}: link {h}" for h in dom["links"] if _HOSTILE_URL.search(h)]
                findings += [f"{path}: math" for _ in range(dom["math"])]
                findings += [f"{path}: script" for _ in range(dom["scripts"])]
                findings += [f"{path}: heading {h}" for h in dom["headings"] if "heading" in h]
        finally:
            browser.close()
    findings += [f"request {url}" for url in requested if _HOSTILE_URL.search(url)]
    assert not findings, "\n".join(findings)
