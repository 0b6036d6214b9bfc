"""The support bundle (yuxi_dash.memory.support.bundle): shape, completeness, Markdown, gates, audit.

Real FalkorDB with the demo graphs (written with graphiti-core's classes), the
real SQLite store with a thread compressed by the offline summarizer and its
offloaded tool results in the real workdir, the LaunchDarkly Files source.
"""

from __future__ import annotations

import gc
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from tests.fixtures.graph import memory_audit
from tests.memory.support_graphs import add_correction
from tests.service.builders import OPERATOR, seed_thread
from yuxi_dash import service as thread_service
from yuxi_dash import sources
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import InvalidInput
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.memory.support.bundle import (
    BUNDLE_ACTION,
    BundleProgress,
    bundle_to_file,
    write_bundle,
)
from yuxi_dash.memory.support.bundle_render import escape_inline, md_code, md_text
from yuxi_dash.memory.support.bundle_schema import BUNDLE_SCHEMA
from yuxi_dash.memory.support.bundle_sources import FACTS_AFTER, collector_paused
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope

VIEWER = Actor(id="support@example.com", role=Role.VIEWER)
USER = "alice_chen"
COOKBOOK_COUNT = "MATCH ()-[e:RELATES_TO]->() WHERE e.group_id = $g RETURN count(e)"
LABEL_FREE_COUNT = "MATCH ()-[e:RELATES_TO]->() RETURN count(e)"


@pytest.fixture
def bundle_env(
    demo_graphs, memory_settings, demo_flags_file, monkeypatch: pytest.MonkeyPatch
) -> Settings:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()
    return get_settings()


def seed_threads(settings: Settings, user_id: str = USER) -> dict[str, Any]:
    """A compressed thread with two offloaded results, one of them changed on disk."""
    seed_thread("bundle-t1", user_id=user_id)
    result = sources.compress_thread_context("bundle-t1", actor=OPERATOR)
    assert result.status == "completed"
    workdir = Workdir(settings.workdir)
    good = workdir.save_tool_result("run_command", "line\n" * 100)
    bad = workdir.save_tool_result("web_search", "result " * 100)
    with session_scope(settings) as session:
        thread_service.index_saved_files(
            session, "bundle-t1", [("c1", "run_command", good), ("c2", "web_search", bad)]
        )
    (Path(settings.workdir) / bad.path).write_text("tampered")
    return {"good": good.path, "bad": bad.path}


def build(fmt: str = "json", user_id: str = USER, **kwargs: Any) -> tuple[str, Any]:
    out = io.StringIO()
    result = write_bundle(user_id, out, actor=VIEWER, fmt=fmt, **kwargs)
    return out.getvalue(), result


def test_json_bundle_is_complete_and_valid(bundle_env, graph_client) -> None:
    seeded = seed_threads(bundle_env)
    fact = graph_client.ro_value("user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN e.uuid")
    add_correction(bundle_env, USER, fact)
    text, result = build(
        fact_page=7, episodes=10
    )  # many keyset pages; fewer episodes than alice has
    bundle = json.loads(text)
    jsonschema.Draft202012Validator(BUNDLE_SCHEMA).validate(bundle)

    cookbook = graph_client.ro_value("user_alice_chen", COOKBOOK_COUNT, {"g": "user_alice_chen"})
    assert bundle["fact_count"] == len(bundle["facts"]) == result.facts == cookbook
    assert cookbook == graph_client.ro_value("user_alice_chen", LABEL_FREE_COUNT)
    uuids = [f["uuid"] for f in bundle["facts"]]
    assert uuids == sorted(set(uuids))  # every fact once, in uuid order across pages
    stored = graph_client.ro_rows(
        "user_alice_chen", "MATCH ()-[e:RELATES_TO]->() RETURN e.uuid AS u"
    )
    assert set(uuids) == {r["u"] for r in stored}
    assert all(f["provenance"]["episodes"] for f in bundle["facts"])
    assert any(f["hits"] > 0 for f in bundle["facts"])
    assert {f["status"] for f in bundle["facts"]} >= {"active", "tentative"}

    assert bundle["flags"][0] == {
        "key": "graphiti-memory",
        "value": True,
        "reason": "FALLTHROUGH",
        "reason_text": "no target or rule matched: the flag's default",
    }
    assert bundle["memory"]["counts"]["relates_to_edges"] == cookbook
    assert len(bundle["episodes"]) == 10 and bundle["episode_limit"] == 10
    times = [e["created_at"] for e in bundle["episodes"]]
    assert times == sorted(times, reverse=True)

    (correction,) = bundle["corrections"]
    assert correction["fact_uuid"] == fact and correction["audit_action"] == "memory.correct"
    assert "fact_embedding" not in correction["before"][fact]

    (thread,) = bundle["threads"]
    assert thread["thread_id"] == "bundle-t1"
    assert thread["last_summary"]["text"] and thread["summary_error"] is None
    checks = {r["path"]: r["sha256_status"] for r in thread["tool_results"]}
    assert checks[seeded["good"]] == "ok" and checks[seeded["bad"]] == "mismatch"
    assert [p for p, status in checks.items() if status != "ok"] == [seeded["bad"]]

    rows = memory_audit(bundle_env, USER)
    assert [(r.action, r.outcome) for r in rows if r.action != "memory.correct"] == [
        (BUNDLE_ACTION, "ok"),
        ("memory.view", "ok"),
    ]
    assert rows[0].id == result.audit_id and rows[0].detail["facts"] == cookbook
    assert rows[1].detail["view"] == "bundle"


def _md_tables(text: str) -> list[list[list[str]]]:
    """Every table in the Markdown as rows of cell texts (escapes resolved by the parser)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables: list[list[list[str]]] = []
    row: list[str] = []
    for index, token in enumerate(tokens):
        if token.type == "table_open":
            tables.append([])
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            inline = tokens[index + 1]
            row.append("".join(child.content for child in inline.children or []))
        elif token.type == "tr_close":
            tables[-1].append(row)
    return tables


def test_markdown_renders_the_same_facts(bundle_env) -> None:
    data, _ = build("json")
    text, result = build("md", fact_page=50)
    facts = {f["uuid"]: f for f in json.loads(data)["facts"]}
    (table,) = [t for t in _md_tables(text) if t[0][:2] == ["uuid", "source"]]
    header, rows = table[0], table[1:]
    assert len(rows) == len(facts) == result.facts
    for row in rows:
        cell = dict(zip(header, row, strict=True))
        fact = facts[cell["uuid"]]
        assert cell["name"] == (fact["name"] or "") and cell["status"] == (fact["status"] or "")
        assert cell["source"] == " ".join((fact["source"] or "").split())[:300]
    assert f"{len(facts):,} fact(s)." in text


def test_markdown_shows_outside_strings_literally() -> None:
    hostile = "![x](https://evil.example/p.png) <b>hi</b> | www.example.com *bold*"
    html = MarkdownIt("commonmark").enable("table").render(md_text(hostile))
    assert "<img" not in html and "<b>" not in html and "<em>" not in html
    assert "href" not in html


@pytest.mark.parametrize(
    "plain", ["alice_chen", "2026-12-02T16:21:46+00:00", "user 42 said: ok, fine (maybe)."]
)
def test_plain_text_is_not_escaped(plain: str) -> None:
    assert md_text(plain) == plain


@pytest.mark.parametrize(
    "hostile",
    [
        "# heading",
        "- item",
        "1. item",
        "> quote",
        "=== setext",
        "***",
        "_emph_ and __strong__",
        "&amp; &#38; entity",
        "text ending in ##",
        "`code` and ``more``",
        "<script>alert(1)</script>",
        "[x]: https://evil.example",
    ],
)
def test_block_starts_and_inline_marks_stay_literal(hostile: str) -> None:
    parser = MarkdownIt("commonmark")
    tokens = parser.parse(f"> {md_text(hostile, block_start=True)}\n")
    inline = [t for t in tokens if t.type == "inline"]
    assert [t.type for t in tokens if t.type.endswith("_open")] == [
        "blockquote_open",
        "paragraph_open",
    ]
    assert len(inline) == 1 and [c.type for c in inline[0].children or []] == ["text"] * len(
        inline[0].children or []
    )
    assert "".join(c.content for c in inline[0].children or []) == hostile
    heading = parser.parse(f"### {md_text(hostile)}\n")
    assert "".join(c.content for c in heading[1].children or []) == hostile


_MARKS = list("#>+=-*`[]<>|~&;:/@_\\!().") + [
    "www.",
    "WWW.",
    "Www.",
    "http://",
    "a@b.co",
    "&amp;",
    "1.",
]
_PLAIN = st.sampled_from(list("aZ09 ") + ["word", "\n", "\t"])


@pytest.mark.parametrize("mark", _MARKS)
@pytest.mark.parametrize("shape", ["{m}", "a{m}", "{m}a", "a {m} b", "x{m}{m}"])
def test_text_without_a_mark_skips_no_escape_it_needs(mark: str, shape: str) -> None:
    """`md_text` runs the inline rules only where a mark is: the same as running them always."""
    text = shape.format(m=mark)
    assert md_text(text) == escape_inline(text)


@given(st.lists(st.one_of(_PLAIN, _PLAIN, _PLAIN, st.sampled_from(_MARKS)), max_size=30))
def test_md_text_is_the_inline_rules_on_any_text(parts: list[str]) -> None:
    text = "".join(parts)
    assert md_text(text) == escape_inline(" ".join(text.split()))


@pytest.mark.parametrize("value", ["t-001", "a|b", "x`y", "`edge`", "2026-12-02T16:21:46+00:00"])
def test_ids_and_timestamps_are_code_spans_shown_as_written(value: str) -> None:
    html = MarkdownIt("commonmark").render(md_code(value))
    assert html.count("<code>") == 1
    table = f"| id | n |\n|---|---|\n| {md_code(value, in_table=True)} | 1 |\n"
    tokens = MarkdownIt("commonmark").enable("table").parse(table)
    cells = [t for t in tokens if t.type == "inline"]
    assert len(cells) == 4  # the pipe inside the code span did not add a cell
    [code] = [c for c in cells[2].children or [] if c.type == "code_inline"]
    assert code.content.replace("\\|", "|") == value


def test_gated_off_user_gets_a_bundle_without_memory(bundle_env) -> None:
    text, result = build(user_id="dmitri_ivanov")
    bundle = json.loads(text)
    jsonschema.Draft202012Validator(BUNDLE_SCHEMA).validate(bundle)
    assert (
        bundle["memory"]["gated_off"]
        and "targeted individually" in (bundle["memory"]["gate_message"])
    )
    assert bundle["facts"] == [] and bundle["episodes"] == [] and result.gated_off
    assert bundle["flags"][0]["value"] is False
    rows = memory_audit(bundle_env, "dmitri_ivanov")
    assert [(r.action, r.outcome) for r in rows] == [
        (BUNDLE_ACTION, "ok"),
        ("memory.view", "gated_off"),
    ]


@pytest.mark.parametrize(
    ("user_id", "kwargs", "action"),
    [
        (USER, {"fmt": "pdf"}, BUNDLE_ACTION),
        (USER, {"episodes": 101}, BUNDLE_ACTION),
        ("bad id!", {}, "memory.view"),
    ],
)
def test_refusals_write_nothing_and_are_audited(bundle_env, user_id, kwargs, action) -> None:
    out = io.StringIO()
    with pytest.raises(InvalidInput):
        write_bundle(user_id, out, actor=VIEWER, **kwargs)
    assert out.getvalue() == ""
    rows = memory_audit(bundle_env, user_id)
    assert [(r.action, r.outcome, r.detail["code"]) for r in rows] == [
        (action, "refused", "invalid_input")
    ]


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_progress_only_grows_and_reaches_the_total(bundle_env, graph_client, fmt: str) -> None:
    steps: list[BundleProgress] = []
    _, result = build(fmt, fact_page=7, episodes=5, progress=steps.append)
    facts = graph_client.ro_value("user_alice_chen", LABEL_FREE_COUNT)
    assert result.facts == facts > 7 * 2  # several pages
    fractions = [s.fraction for s in steps]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert [s.facts for s in steps] == sorted(s.facts for s in steps)
    fact_steps = [s for s in steps if s.section == "facts"]
    assert [s.facts for s in fact_steps] == [*range(0, facts, 7), facts]  # one per page
    assert all(s.facts_total == facts for s in steps)
    assert [s.section for s in steps[len(fact_steps) :]] == [
        "episodes",
        "corrections",
        "threads",
        "done",
    ]
    assert (steps[-1].episodes, steps[-1].episodes_total) == (result.episodes, 5)


def test_gated_off_progress_still_ends_done(bundle_env) -> None:
    steps: list[BundleProgress] = []
    build(user_id="dmitri_ivanov", progress=steps.append)
    assert steps[0].facts_total == 0 and steps[-1].section == "done"
    assert [s.fraction for s in steps] == sorted(s.fraction for s in steps)


def test_the_page_size_does_not_change_the_bundle(bundle_env) -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    for fmt in ("json", "md"):
        pages = [build(fmt, fact_page=size, now=now)[0] for size in (3, 5000)]
        assert pages[0] == pages[1]


def test_the_collector_is_restored_after_a_page() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed read")
    assert gc.isenabled()


def test_overlapping_pauses_bring_the_collector_back_when_the_last_ends() -> None:
    assert gc.isenabled()
    first, second = collector_paused(), collector_paused()
    first.__enter__()
    second.__enter__()  # a second bundle's page, read at the same time
    first.__exit__(None, None, None)
    assert not gc.isenabled()  # the second page is still being read
    second.__exit__(None, None, None)
    assert gc.isenabled()  # never left off by the order they ended in


def test_bundle_to_file_leaves_no_partial_file(bundle_env, tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    with pytest.raises(InvalidInput):
        bundle_to_file(USER, target, actor=VIEWER, fmt="pdf")
    assert list(tmp_path.glob("*b.json*")) == []
    result = bundle_to_file(USER, target, actor=VIEWER)
    assert json.loads(target.read_text())["fact_count"] == result.facts
    assert list(tmp_path.glob(".b.json.*")) == []


class StopTheScript(BaseException):
    """What Streamlit raises in a page's script thread when the user stops or reruns it."""


def test_a_bundle_stopped_from_its_progress_callback_is_audited(bundle_env, tmp_path) -> None:
    def stop(step: BundleProgress) -> None:
        if step.facts:
            raise StopTheScript

    target = tmp_path / "b.json"
    with pytest.raises(StopTheScript):
        bundle_to_file(USER, target, actor=VIEWER, fact_page=7, progress=stop)
    assert list(tmp_path.glob("*b.json*")) == []  # no bundle, no partial file
    rows = memory_audit(bundle_env, USER)
    assert (rows[0].action, rows[0].outcome) == (BUNDLE_ACTION, "failed")
    assert rows[0].detail["code"] == "StopTheScript"


def test_a_bundle_stopped_on_its_last_report_leaves_no_file_and_no_ok_audit(
    bundle_env, tmp_path
) -> None:
    """A Stop or Rerun on the last bar update ("done"): the audit and the file agree."""
    sections: list[str] = []

    def stop_when_done(step: BundleProgress) -> None:
        sections.append(step.section)
        if step.section == "done":
            raise StopTheScript

    target = tmp_path / "b.json"
    with pytest.raises(StopTheScript):
        bundle_to_file(USER, target, actor=VIEWER, fact_page=7, progress=stop_when_done)
    assert sections[-1] == "done" and "threads" in sections  # it got to the very end
    assert list(tmp_path.glob("*b.json*")) == []  # no bundle, no partial file
    rows = memory_audit(bundle_env, USER)
    assert [(r.action, r.outcome) for r in rows if r.action == BUNDLE_ACTION] == [
        (BUNDLE_ACTION, "failed")
    ]
    assert rows[0].detail["code"] == "StopTheScript"


def test_fact_pages_stay_off_the_relationship_index(bundle_env, graph_client) -> None:
    """After a restart the relationship index loses node 0's facts: the keyset must not use it."""
    plan = graph_client.explain("user_alice_chen", FACTS_AFTER, {"after": "", "limit": 10})
    assert "Index Scan" not in plan and "Conditional Traverse" in plan


def test_markdown_keeps_line_breaks_and_names_the_corrected_fact() -> None:
    """Issue 37 item 9: no literal "\\n" or "##" in the Markdown bundle; a correction names
    the fact's text, not only its uuid."""
    from yuxi_dash.memory.support.bundle_render import MarkdownSink

    out = io.StringIO()
    sink = MarkdownSink(out)
    sink.episodes(
        [
            {
                "created_at": "2026-12-02T16:21:46+00:00",
                "name": "episode 1",
                "content_bytes": 80,
                "uuid": "e1",
                "memory_kind": "preference",
                "content": json.dumps(
                    {"memory_kind": "preference", "content": "I prefer dark mode.\nIn Polish."}
                ),
                "content_truncated": False,
            }
        ],
        10,
    )
    sink.correction(
        {
            "at": "2026-12-02T16:30:00+00:00",
            "actor": "ops@example.com",
            "action": "retract",
            "fact_uuid": "f-1",
            "ticket": "T-1",
            "undone_at": None,
            "reason": "wrong",
            "before": {"f-1": {"uuid": "f-1", "fact": "Alice prefers *light* mode"}},
            "after": {},
        }
    )
    sink.corrections_done(1)
    sink.thread(
        {
            "thread_id": "t-1",
            "agent_slug": "a",
            "summary_pressure_ratio": 0.5,
            "context_usage_ratio": 0.2,
            "status": "active",
            "last_summary": {
                "cutoff_index": 4,
                "text": "Summary.\n\n## SESSION INTENT\n- Triage advisories.\n- Plan upgrades.",
            },
            "summary_error": None,
            "tool_results": [],
        }
    )
    text = out.getvalue()
    quoted = [line for line in text.splitlines() if line.startswith(">")]
    assert quoted and not any("\\n" in line or "#" in line for line in quoted)
    html = MarkdownIt("commonmark").render(text)
    assert "I prefer dark mode.<br />\nIn Polish." in html  # the episode's own line break
    assert "<strong>SESSION INTENT</strong><br />\n- Triage advisories.<br />\n- Plan" in html
    quotes = re.findall(r"<blockquote>.*?</blockquote>", html, re.DOTALL)
    assert len(quotes) == 2 and not any("<li>" in q or "<h" in q for q in quotes)  # text only
    (table,) = [t for t in _md_tables(text) if t[0][:3] == ["at", "actor", "action"]]
    cells = dict(zip(table[0], table[1], strict=True))
    assert cells["fact"] == "Alice prefers *light* mode" and cells["fact_uuid"] == "f-1"
