"""app.py: identity first, then navigation; a refused visitor sees the refusal and nothing else."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from tests.fixtures.app import APP


def test_local_mode_opens_the_overview_with_the_local_banner(
    app_test: Callable[..., AppTest],
) -> None:
    at = app_test()
    assert not at.exception
    assert [t.value for t in at.title] == ["Pressure overview"]
    banner = " ".join(i.value for i in at.sidebar.info)
    assert "Local mode" in banner and "operator@localhost" in banner


def test_the_sidebar_lists_every_page_with_no_view_more(
    app_test: Callable[..., AppTest], monkeypatch: pytest.MonkeyPatch
) -> None:
    import streamlit as st

    calls: list[dict[str, object]] = []
    navigation = st.navigation

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(kwargs)
        return navigation(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(st, "navigation", spy)
    at = app_test()
    assert not at.exception
    assert calls and calls[-1].get("expanded") is True  # Memory support is not hidden


def test_proxy_mode_without_the_trusted_proxy_shows_only_the_refusal(
    demo_env: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuxi_dash.settings import get_settings

    monkeypatch.setenv("YUXI_DASH_AUTH_MODE", "proxy")
    monkeypatch.setenv("YUXI_DASH_PROXY_SECRET", "s3cret")
    monkeypatch.setenv("YUXI_DASH_ADMINS", "operator@localhost")
    get_settings.cache_clear()
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    assert [t.value for t in at.title] == ["yuxi-dash"]
    assert len(at.error) == 1 and "trusted proxy" in at.error[0].value
    assert not at.metric and not at.dataframe and not at.button


def test_oidc_mode_refuses_a_signed_in_user_on_no_list(
    demo_env: object, monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    from yuxi_dash.settings import get_settings

    monkeypatch.setenv("YUXI_DASH_AUTH_MODE", "oidc")
    get_settings.cache_clear()
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.user = {"is_logged_in": True, "email": "stranger@example.org"}
    at.run()
    assert not at.exception
    # without [auth] secrets the refusal names the missing configuration; either way: nothing else
    assert len(at.error) == 1
    assert not at.metric and not at.dataframe


def test_a_database_that_cannot_be_reached_is_one_line(
    app_test: Callable[..., AppTest], monkeypatch: pytest.MonkeyPatch
) -> None:
    from yuxi_dash.settings import get_settings

    monkeypatch.setenv("YUXI_DASH_DATABASE_URL", "postgresql+psycopg://127.0.0.1:1/nothing")
    get_settings.cache_clear()
    at = app_test("app_pages/threads.py")
    assert not at.exception
    assert [e.value for e in at.error] == [
        "The database cannot be reached right now; check YUXI_DASH_DATABASE_URL or try again "
        "in a moment. [store_unavailable]"
    ]
