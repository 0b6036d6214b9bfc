"""pages/tool_results.py on the demo: SHA-256 status, reads only when picked and audited, and a
crafted path refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.files.tool_results import READ_ACTION, count_tool_results
from yuxi_dash.files.workdir import Workdir
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import ToolResult
from yuxi_dash.store.queries import list_audit, list_threads

PAGE = "pages/tool_results.py"
SALVAGED = (
    "Preview salvaged from a result that was not valid JSON: the complete leading records "
    "are shown; the file holds every byte."
)


def test_results_list_checks_hashes_and_opening_one_is_audited(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yuxi_dash.files.tool_results

    with session_scope(demo_env) as session:
        total = count_tool_results(session)
    assert total > 0, "the demo should offload some tool results"
    reads: list[int] = []  # every read of a file, audited or not
    real_read = yuxi_dash.files.tool_results.read_tool_result

    def counted_read(result_id: int, **kwargs: Any) -> Any:
        reads.append(int(result_id))
        return real_read(result_id, **kwargs)

    monkeypatch.setattr(yuxi_dash.files.tool_results, "read_tool_result", counted_read)
    at = app_test("pages/audit.py")  # cache the audit log as it is before any read
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
    at.switch_page("pages/audit.py").run()  # the audit page is not served from a stale cache
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
