"""app_pages/tool_results.py on the demo: SHA-256 status, reads only when picked and audited, and a
crafted path refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.queries import list_audit, list_threads
from yuxi_dash.tool_results.index import READ_ACTION, count_tool_results

PAGE = "app_pages/tool_results.py"
SALVAGED = (
    "Preview salvaged from a result that was not valid JSON: the complete leading records "
    "are shown; the file holds every byte."
)


def test_results_list_checks_hashes_and_opening_one_is_audited(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yuxi_dash.tool_results.index
    import yuxi_dash.tool_results.opened

    with session_scope(demo_env) as session:
        total = count_tool_results(session)
    assert total > 0, "the demo should offload some tool results"
    reads: list[int] = []  # every read of a file, audited or not
    for module, name in (
        (yuxi_dash.tool_results.index, "read_tool_result"),
        (yuxi_dash.tool_results.opened, "open_tool_result"),
    ):
        real = getattr(module, name)

        def counted(result_id: int, *, _real: Any = real, **kwargs: Any) -> Any:
            reads.append(int(result_id))
            return _real(result_id, **kwargs)

        monkeypatch.setattr(module, name, counted)
    at = app_test("app_pages/audit.py")  # cache the audit log as it is before any read
    at.switch_page(PAGE).run()
    assert not at.exception
    listing = at.dataframe[0].value
    assert len(listing) == min(total, 200)
    assert set(listing["sha_status"]) == {"ok"}
    # arriving lists the results and opens none: no file read, no audit row, nothing shown
    picker = at.selectbox(key="tool_result_id")
    assert picker.value is None
    assert reads == []
    with session_scope(demo_env) as session:
        assert list_audit(session, action=READ_ACTION) == []
    assert not at.success and not at.code and not at.get("download_button")
    assert any("writes an audit row" in c.value for c in at.caption)
    opened = int(listing["id"].iloc[0])
    picker.set_value(opened).run()  # picking one is the deliberate act
    assert not at.exception
    assert reads == [opened]
    assert not any("writes an audit row" in c.value for c in at.caption)
    assert any(s.value.startswith("SHA-256 ok") for s in at.success)
    assert [h.value for h in at.subheader][:2] == ["What the model sees", "Full content"]
    assert at.get("download_button")
    with session_scope(demo_env) as session:
        audited = list_audit(session, action=READ_ACTION, target=f"tool_result:{opened}")
    assert [r.outcome for r in audited] == ["ok"]
    at.number_input(key="tool_result_page").set_value(1).run()  # a rerun does not read again
    assert reads == [opened]
    with session_scope(demo_env) as session:
        assert len(list_audit(session, action=READ_ACTION)) == 1
    at.switch_page("app_pages/audit.py").run()  # the audit page is not served from a stale cache
    audit = at.dataframe[0].value
    assert f"tool_result:{opened}" in set(audit["target"])


def test_a_crafted_path_is_refused_and_audited(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    with session_scope(demo_env) as session:
        thread_id = list_threads(session, limit=1)[0].thread_id
        crafted = ToolResult(
            thread_id=thread_id,
            tool_name="run_command",
            sha256="0" * 64,
            path="../../../../etc/passwd",
            chars=10,
            approx_tokens=3,
        )
        session.add(crafted)
        session.flush()
        crafted_id = crafted.id
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(crafted_id).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "[path_refused]" in errors[0]
    assert not at.code  # nothing of the file was shown
    with session_scope(demo_env) as session:
        reads = list_audit(session, action=READ_ACTION, target=f"tool_result:{crafted_id}")
    assert [r.outcome for r in reads] == ["refused"]


def _kb_result(records: int) -> str:
    return json.dumps(
        {
            "query": "refund *policy* <b>",
            "results": [
                {"id": f"chunk-{n}", "score": 0.5, "content": "Refunds [link](x) " * 40}
                for n in range(records)
            ],
        }
    )


def _offload(settings: Settings, text: str) -> int:
    """Save ``text`` as a query_kb result in the demo's workdir and index it; its row id."""
    saved = Workdir(settings.workdir).save_tool_result("query_kb", text)
    with session_scope(settings) as session:
        row = ToolResult(
            thread_id=list_threads(session, limit=1)[0].thread_id,
            tool_name="query_kb",
            sha256=saved.sha256,
            path=saved.path,
            chars=saved.chars,
            approx_tokens=saved.approx_tokens,
        )
        session.add(row)
        session.flush()
        return int(row.id)


@pytest.mark.parametrize(
    ("text", "salvaged"),
    [
        (_kb_result(6)[:-700], True),  # cut short mid-record: the leading records are salvaged
        (_kb_result(6) + "\n(results truncated by the server)", True),  # trailing text
        (_kb_result(6), False),  # valid JSON: no caption
    ],
    ids=["cut", "trailing_text", "valid"],
)
def test_a_salvaged_preview_says_so(
    app_test: Callable[..., AppTest], demo_env: Settings, text: str, salvaged: bool
) -> None:
    result_id = _offload(demo_env, text)
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception
    assert any(s.value.startswith("SHA-256 ok") for s in at.success)
    captions = [c.value for c in at.caption]
    # shown literally: the Markdown-escaped sentence renders as the words themselves
    shown = [c for c in captions if "salvaged" in c]
    if salvaged:
        assert len(shown) == 1
        assert shown[0].replace("\\", "") == SALVAGED
    else:
        assert shown == []


def test_a_field_the_preview_left_out_reads_as_left_out_never_none(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """The preview's table: a field the preview has for some records only (here the body,
    which the leading record keeps) reads "not in the preview; in the file" where the
    file's record has it, and "–" where the file's record has none."""
    records = [
        {
            "id": f"chunk-{n}",
            "title": f"Refund policy - part {n}",
            "source": f"kb/refunds_{n}.md",
            "score": 0.9 - n / 100,
            "content": "Annual plans are refunded pro rata within 30 days. " * 20,
            "metadata": {"chunk_index": n},
        }
        for n in range(14)
    ]
    del records[2]["content"]  # no body in the file either
    result_id = _offload(demo_env, json.dumps({"query": "refunds", "results": records}))
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception
    table = at.dataframe[1].value  # the listing, then the preview's records
    assert list(table["id"]) == [f"chunk-{n}" for n in range(len(table))]
    assert 4 <= len(table) < 14
    cells = [str(value) for column in table.columns for value in table[column]]
    assert "None" not in cells and "nan" not in cells
    bodies = list(table["content"])
    assert bodies[0].startswith("Annual plans are refunded") and bodies[2] == "–"
    assert bodies[1] == bodies[3] == "not in the preview; in the file"
    assert list(table["source"]) == [f"kb/refunds_{n}.md" for n in range(len(table))]


def _offloaded(settings: Settings, tool: str) -> tuple[int, str, Path]:
    """A demo result of ``tool`` whose thread's checkpoint holds the preview the model got:
    (its id, that preview, its file)."""
    from yuxi_dash.compression import parse_saved_result
    from yuxi_dash.store.queries import get_thread

    with session_scope(settings) as session:
        rows = session.scalars(
            sa.select(ToolResult).where(ToolResult.tool_name == tool).order_by(ToolResult.id.desc())
        ).all()
        for row in rows:
            messages = get_thread(session, row.thread_id).state.messages
            for message in messages:
                if getattr(message, "tool_call_id", None) == row.tool_call_id:
                    saved = parse_saved_result(message.content)
                    if saved is not None and saved.path == row.path:
                        return row.id, saved.preview, Path(settings.workdir) / row.path
    raise AssertionError(f"the demo offloads {tool} results")


def test_a_changed_file_does_not_change_what_the_model_saw(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 item 11: "What the model sees" is the preview the model got (the checkpoint's),
    never one rebuilt from a file changed since; the file's state stands beside it."""
    result_id, preview, file = _offloaded(demo_env, "query_kb")
    original = file.read_text()
    file.write_text(original.replace('"results"', '"results_tampered"').replace("a", "TAMPERED", 3))
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception
    assert any(e.value.startswith("SHA-256 content changed") for e in at.error)
    model, full = at.columns[0], at.columns[1]
    assert model.code[0].value == preview  # the exact preview the model got
    assert not any("TAMPERED" in c.value for c in model.code)
    assert any(c.value.startswith("The preview the model got") for c in model.caption)
    assert any(c.value.startswith("The file now: content changed") for c in full.caption)
    assert "TAMPERED" in full.code[0].value  # the file as it is now, beside it

    file.unlink()  # gone from this volume: what the model saw is still shown, no refusal
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception and not at.error
    assert any(w.value.startswith("SHA-256 file not on this volume") for w in at.warning)
    assert at.columns[0].code[0].value == preview
    assert any(
        c.value.startswith("The file now: file not on this volume") for c in at.columns[1].caption
    )
    with session_scope(demo_env) as session:
        reads = list_audit(session, action=READ_ACTION, target=f"tool_result:{result_id}")
    assert [(r.outcome, r.detail["integrity"], r.detail["sent"]) for r in reads] == [
        ("ok", "missing", True),
        ("ok", "mismatch", True),
    ]


def test_a_json_result_is_shown_indented(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 item 9: a tool result's JSON content is not one unformatted line."""
    result_id, _, file = _offloaded(demo_env, "query_kb")
    at = app_test(PAGE)
    at.selectbox(key="tool_result_id").set_value(result_id).run()
    assert not at.exception
    indented = json.dumps(json.loads(file.read_text()), ensure_ascii=False, indent=2)
    window = at.columns[1].code[0].value
    assert window.startswith('{\n  "') and indented.startswith(window)
    assert any("JSON, shown indented" in c.value for c in at.columns[1].caption)
