"""Reading or exporting the audit log is itself audited, admins only (yuxi_dash.access.audit_review).

The service is driven on the test's own database; the page through AppTest;
the CSV export by clicking it in headless Chromium against a live `yuxi-dash
serve`, because the file is produced only when the button is clicked.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from streamlit.testing.v1 import AppTest

from yuxi_dash.access.audit import record_audit
from yuxi_dash.access.audit_review import (
    EXPORT_ACTION,
    VIEW_ACTION,
    AuditFilter,
    export_audit_log_csv,
    read_audit_log,
)
from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden, InvalidInput
from yuxi_dash.settings import Settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.models import AuditEntry

ADMIN = Actor(id="boss@example.com", role=Role.ADMIN, email="boss@example.com", via="oidc")
OPERATOR = Actor(id="kim@example.com", role=Role.OPERATOR, email="kim@example.com", via="oidc")


def _rows(action: str | None = None) -> list[AuditEntry]:
    with session_scope() as session:
        query = sa.select(AuditEntry).order_by(AuditEntry.id)
        if action:
            query = query.where(AuditEntry.action == action)
        rows = list(session.scalars(query))
        session.expunge_all()
    return rows


def _seed() -> None:
    record_audit(actor="kim@example.com", action="compress", target="thread:t-1", outcome="ok")
    record_audit(actor='=HYPERLINK("http://x")', action="compress", target="@t-2", outcome="no")


def test_an_operator_is_refused_and_the_attempt_is_recorded() -> None:
    _seed()
    for read in (read_audit_log, export_audit_log_csv):
        with pytest.raises(Forbidden):
            read(OPERATOR, AuditFilter())
    refused = [(r.actor, r.action, r.outcome, r.detail["code"]) for r in _rows() if r.id > 2]
    assert refused == [
        ("kim@example.com", VIEW_ACTION, "refused", "forbidden"),
        ("kim@example.com", EXPORT_ACTION, "refused", "forbidden"),
    ]


def test_an_admin_view_is_one_row_naming_the_filters_not_their_values() -> None:
    _seed()
    since = datetime.now(UTC) - timedelta(days=1)
    rows = read_audit_log(
        ADMIN, AuditFilter(actor="kim@example.com", target="thread:t-1", since=since)
    )
    assert [(r.actor, r.target) for r in rows] == [("kim@example.com", "thread:t-1")]
    (view,) = _rows(VIEW_ACTION)
    assert (view.actor, view.target, view.outcome) == ("boss@example.com", "audit_log", "ok")
    assert view.detail["filters"] == ["actor", "target"] and view.detail["rows"] == 1
    assert "kim@example.com" not in json.dumps(view.detail)
    assert "thread:t-1" not in json.dumps(view.detail)


def test_an_export_is_one_row_and_the_csv_cannot_run_formulas() -> None:
    _seed()
    data = export_audit_log_csv(ADMIN, AuditFilter(outcomes=("ok", "no")))
    table = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    assert table[0] == ["at", "actor", "action", "target", "outcome", "detail"]
    cells = {cell for row in table[1:] for cell in row}
    assert '\'=HYPERLINK("http://x")' in cells and "'@t-2" in cells
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in cells)
    (export,) = _rows(EXPORT_ACTION)
    assert export.actor == "boss@example.com" and export.outcome == "ok"
    assert export.detail["rows"] == 2 and export.detail["outcomes"] == 2


def test_hidden_actions_are_left_out_and_only_counted_in_the_row() -> None:
    _seed()
    every = read_audit_log(ADMIN, AuditFilter())
    hidden = {every[0].action}
    rows = read_audit_log(ADMIN, AuditFilter(hidden_actions=tuple(hidden)))
    assert rows and not {r.action for r in rows} & hidden
    assert len(rows) < len(every)
    view = _rows(VIEW_ACTION)[-1]
    assert view.detail["hidden_actions"] == 1 and every[0].action not in json.dumps(view.detail)


@pytest.mark.parametrize(
    "filters",
    [
        AuditFilter(hidden_actions=("view\x00",)),
        AuditFilter(actor="kim\x00"),
        AuditFilter(target="x" * 300),
        AuditFilter(limit=10**9),
    ],
)
def test_a_malformed_filter_is_refused_and_recorded(filters: AuditFilter) -> None:
    with pytest.raises(InvalidInput):
        read_audit_log(ADMIN, filters)
    (refused,) = _rows(VIEW_ACTION)
    assert refused.outcome == "refused" and refused.detail["code"] == "invalid_input"


def test_the_page_records_each_read_not_each_rerun(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    _seed()
    at = app_test("app_pages/audit.py")
    assert not at.exception
    assert len(_rows(VIEW_ACTION)) == 1
    at.run()  # a rerun with the same filters shows what this session already read
    assert len(_rows(VIEW_ACTION)) == 1
    at.text_input[0].set_value("kim@example.com").run()
    views = _rows(VIEW_ACTION)
    assert len(views) == 2 and views[-1].detail["filters"] == ["actor"]
    assert set(at.dataframe[0].value["actor"]) == {"kim@example.com"}
    at.button[0].click().run()  # Reload
    assert len(_rows(VIEW_ACTION)) == 3
    assert not _rows(EXPORT_ACTION)  # nothing exported until the button is clicked


@pytest.mark.browser
def test_clicking_export_in_the_browser_records_the_export(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.fixtures.live_server import dashboard_env, launch_chromium, serve_dashboard

    env = dashboard_env(tmp_path, YUXI_DASH_AUTH_MODE="local")
    database = Settings(database_url=env["YUXI_DASH_DATABASE_URL"])
    with serve_dashboard(tmp_path, env) as url, sync_playwright() as playwright:
        record_audit(
            actor="kim@example.com",
            action="compress",
            target="thread:t-1",
            outcome="ok",
            settings=database,
        )
        browser = launch_chromium(playwright)
        try:
            page = browser.new_page(accept_downloads=True)
            page.goto(f"{url}/audit")
            expect(page.get_by_role("heading", name="Audit log")).to_be_visible(timeout=90_000)
            with page.expect_download(timeout=60_000) as download:
                page.get_by_role("button", name="Export CSV").click()
            exported = Path(download.value.path()).read_text(encoding="utf-8")
        finally:
            browser.close()
    with session_scope(database) as session:
        actions = session.execute(
            sa.select(AuditEntry.actor, AuditEntry.action, AuditEntry.outcome).order_by(
                AuditEntry.id
            )
        ).all()
    assert [tuple(a) for a in actions if a[1] != "compress"] == [
        ("operator@localhost", VIEW_ACTION, "ok"),
        ("operator@localhost", EXPORT_ACTION, "ok"),
    ]
    assert exported.startswith("at,actor,action,target,outcome,detail")
    assert "kim@example.com" in exported
