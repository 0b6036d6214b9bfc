"""app_pages/threads.py on the demo: the 85% list, the compress flow, and what a viewer may not do."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from yuxi_dash.access.roles import Actor, Role
from yuxi_dash.errors import Forbidden
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.sources import compress_thread_context
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import get_thread, list_threads
from yuxi_dash.store.thread_list import thread_forecasts
from yuxi_dash.store.thread_store import load_state, state_store
from yuxi_dash.ui.page_text import crossing_text

PAGE = "app_pages/threads.py"


def _store_hot_threads(settings: Settings) -> list[str]:
    with session_scope(settings) as session:
        return [t.thread_id for t in list_threads(session, min_pressure=0.85, limit=100_000)]


def _store_actionable(settings: Settings) -> list[str]:
    """The hot threads an operator can compress now: the list the page opens with."""
    with session_scope(settings) as session:
        rows = list_threads(session, min_pressure=0.85, limit=100_000)
    return [
        t.thread_id
        for t in rows
        if t.capable and t.busy_reason is None and not t.attached and t.status != "deleted"
    ]


def _listed(at: AppTest) -> list[str]:
    return at.dataframe[0].value["thread"].tolist()


def _show_all(at: AppTest) -> AppTest:
    return at.toggle(key="threads_actionable_only").set_value(False).run()


def _one_checkpoint_after(settings: Settings, thread_id: str, seen: str | None) -> str:
    """The thread's newest checkpoint id, asserting it is exactly one write after `seen`."""
    newest = load_state(thread_id, settings)
    assert newest is not None and newest.checkpoint_id not in (None, seen)
    (latest,) = state_store(settings).history(thread_id, limit=1)
    assert latest.checkpoint_id == newest.checkpoint_id
    assert latest.parent_checkpoint_id == seen  # nothing else was written in between
    return newest.checkpoint_id


def _first_idle_capable(settings: Settings) -> str:
    with session_scope(settings) as session:
        rows = list_threads(session, min_pressure=0.85, limit=100_000)
    return next(t.thread_id for t in rows if t.capable and t.busy_reason is None)


def test_list_holds_exactly_the_threads_at_or_above_85_percent(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test(PAGE)
    assert not at.exception
    # drawn through app.py (navigation, sign-in line), not as a page script run alone
    assert any("Signed in as" in c.value for c in at.sidebar.caption)
    # it opens on the threads an operator can act on, then shows every one on request
    assert _listed(at) == _store_actionable(demo_env)
    hidden = len(_store_hot_threads(demo_env)) - len(_listed(at))
    assert hidden > 0 and any(
        f"{hidden:,} threads that cannot be compressed now are hidden" in c.value
        for c in at.caption
    )
    at = _show_all(at)
    expected = _store_hot_threads(demo_env)
    assert expected, "the demo should have threads at or above 85%"
    assert _listed(at) == expected  # same threads, same order (highest pressure first)
    pressures = at.dataframe[0].value["pressure"].tolist()
    assert all(p >= 85.0 for p in pressures)  # percent, rounded as pct() writes it
    assert pressures == sorted(pressures, reverse=True)


def test_the_list_says_which_threads_cannot_be_compressed_and_why(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = _show_all(app_test(PAGE))
    assert not at.exception
    table = at.dataframe[0]
    unsupported = int((table.value["compression"] == "unsupported").sum())
    assert unsupported > 0, "the demo's report-writer threads cannot be compressed"
    assert (
        f"{unsupported:,} of these threads cannot be compressed here: {unsupported:,} because "
        "their agent does not support context compression."
    ) in [c.value for c in at.caption]
    columns = json.loads(table.proto.columns)
    assert "does not support context compression" in columns["compression"]["help"]
    assert columns["tokens to threshold"]["label"] == "To threshold"
    assert "how far over it" in columns["tokens to threshold"]["help"]
    box = at.selectbox(key="compress_thread")
    assert "highest one that can be compressed" in box.proto.help
    assert box.value == _first_idle_capable(demo_env)  # why it is not the top row
    # the label and the count come from the loader: the page only draws them
    from yuxi_dash.ui import loaders

    data = loaders.threads()
    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=100_000)
    assert data["rows"]["compression"].tolist() == [t.compression for t in hot]
    assert table.value["compression"].tolist() == data["rows"]["compression"].tolist()
    assert data["unsupported"] == unsupported == sum(not t.capable for t in hot)


PLATFORM = "platform-db:5432/agents"


def test_an_attached_thread_says_so_and_is_counted_with_the_rest(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 29 item 4: "attached: <platform label>" in the row, the reason and the count."""
    import sqlalchemy as sa

    from yuxi_dash.store.models import Conversation, ScanWatermark

    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=100_000)
        target = next(t.thread_id for t in hot if t.capable and not t.busy_reason)
        session.execute(  # as an attach scan projects a platform's thread
            sa.update(Conversation)
            .where(Conversation.thread_id == target)
            .values(origin="attached")
        )
        session.add(ScanWatermark(source=PLATFORM, checkpoint_id="x", threads=1))
    unsupported = sum(not t.capable for t in hot)
    label = f"attached: {PLATFORM}"

    at = _show_all(app_test(PAGE))
    assert not at.exception
    row = at.dataframe[0].value.set_index("thread").loc[target]
    assert row["compression"] == label
    assert (
        f"{unsupported + 1:,} of these threads cannot be compressed here: {unsupported:,} "
        f"because their agent does not support context compression; 1 {label} (its platform "
        "compresses them)."
    ) in [c.value for c in at.caption]
    at.selectbox(key="compress_thread").set_value(target).run()
    button = at.button(key="compress_one")
    assert button.disabled and button.help.startswith(f"{label}: the platform owns")
    assert target not in at.multiselect(key="compress_selection").options


def test_each_row_says_when_it_crosses_the_threshold(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 40: an idle row's note is its forecast (`compression.forecast`), in turns."""
    at = _show_all(app_test(PAGE))
    table = at.dataframe[0].value
    with session_scope(demo_env) as session:
        rows = list_threads(session, min_pressure=0.85, limit=100_000)
        expected = thread_forecasts(session, rows)
    forecast_notes = 0
    for thread_id, note in zip(table["thread"], table["note"], strict=True):
        turns = expected[thread_id]["turns_to_100"]
        if note.startswith("100% in "):
            forecast_notes += 1
            assert note == f"100% in {crossing_text(turns, None)}"
        elif not note:
            assert turns in (None, 0)  # over the threshold already, or no forecast
    assert forecast_notes, "the demo forecasts some idle thread"


def test_to_threshold_reads_as_room_left_or_over_by(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = _show_all(app_test(PAGE))
    with session_scope(demo_env) as session:
        hot = {t.thread_id: t for t in list_threads(session, min_pressure=0.85, limit=100_000)}
    shown = at.dataframe[0].value.set_index("thread")["tokens to threshold"]
    assert any(text.startswith("over by ") for text in shown)
    for thread_id, text in shown.items():
        room = hot[thread_id].summary_trigger_tokens - hot[thread_id].next_llm_input_tokens
        assert text == (f"{room:,} left" if room >= 0 else f"over by {-room:,}")
        assert "-" not in text


def test_compress_one_thread_through_the_dialog(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    target = _first_idle_capable(demo_env)
    with session_scope(demo_env) as session:
        before = get_thread(session, target)
    at = app_test(PAGE)
    box = at.selectbox(key="compress_thread")
    box.set_value(target).run()
    at.button(key="compress_one").click().run()
    assert not at.exception
    assert at.button(key="confirm_compress")  # the dialog with the preview is open
    preview = at.table[-1].value
    assert preview.index.tolist() == [target]
    assert preview.index.name == "Thread"  # the names the pages use, not raw field names
    assert int(preview["Messages to summarize"].iloc[0]) > 0
    assert "Checkpoint" in preview.columns and "Note" not in preview.columns  # empty: left out

    at.button(key="confirm_compress").click().run()
    assert not at.exception
    lines = [s.value for s in at.success]
    assert len(lines) == 1 and lines[0].startswith(f"{target}: compressed ")
    assert "→" in lines[0] and "outputs/conversation_history/" in lines[0]
    with session_scope(demo_env) as session:
        after = get_thread(session, target)
    assert after.checkpoint_id == _one_checkpoint_after(demo_env, target, before.checkpoint_id)
    assert after.summary.checkpoint_id == after.checkpoint_id  # the projection is current
    assert after.summary.summary_pressure_ratio < before.summary.summary_pressure_ratio
    assert after.summary.summary_active
    # the list changed: it is the store's list again, which no longer matches the old one
    assert _listed(at) == _store_actionable(demo_env)
    if after.summary.summary_pressure_ratio < 0.85:
        assert target not in _listed(at)


def test_bulk_compress_reports_one_line_per_thread(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    at = app_test(PAGE)
    eligible = at.multiselect(key="compress_selection").options
    assert len(eligible) >= 2
    picked = eligible[:2]
    at.multiselect(key="compress_selection").set_value(picked).run()
    at.button(key="compress_bulk").click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    lines = [m.value for m in (*at.main.success, *at.main.info, *at.main.error)]
    assert sorted(line.split(":")[0] for line in lines) == sorted(picked)
    assert all("\n" not in line for line in lines)


def test_a_viewer_cannot_compress_and_the_service_refuses_even_if_asked(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YUXI_DASH_VIEWERS", "operator@localhost")
    get_settings.cache_clear()
    target = _first_idle_capable(demo_env)
    with session_scope(demo_env) as session:
        before = get_thread(session, target)

    at = app_test(PAGE)
    assert not at.exception
    assert at.button(key="compress_one").disabled
    assert at.button(key="compress_bulk").disabled
    assert at.multiselect(key="compress_selection").options == []

    # Forge the pending request the disabled button would have made: the service still refuses.
    at.session_state["compress_pending"] = [
        {"thread_id": target, "checkpoint_id": before.checkpoint_id}
    ]
    at.run()
    at.button(key="confirm_compress").click().run()
    errors = [e.value for e in at.error]
    assert any("[forbidden]" in e and e.startswith(f"{target}: Not allowed") for e in errors)
    with pytest.raises(Forbidden):
        compress_thread_context(target, actor=Actor(id="v@example.com", role=Role.VIEWER))
    with session_scope(demo_env) as session:
        assert get_thread(session, target).checkpoint_id == before.checkpoint_id


def test_confirming_after_the_thread_moved_is_refused_as_stale(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    target = _first_idle_capable(demo_env)
    at = app_test(PAGE)
    at.selectbox(key="compress_thread").set_value(target).run()
    at.button(key="compress_one").click().run()  # the dialog shows the preview (checkpoint c)
    with session_scope(demo_env) as session:
        seen = get_thread(session, target).checkpoint_id
    # someone else compresses it first: the checkpoint the operator saw is now old
    compress_thread_context(target, actor=Actor(id="other@example.com", role=Role.OPERATOR))
    at.button(key="confirm_compress").click().run()
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and errors[0].startswith(f"{target}: Stale")
    assert "[stale_state]" in errors[0]
    landed = _one_checkpoint_after(demo_env, target, seen)  # only the other compress landed
    with session_scope(demo_env) as session:
        assert get_thread(session, target).checkpoint_id == landed


def test_the_same_flow_on_postgresql(demo_env_postgres: Settings) -> None:
    from tests.fixtures.app import APP
    from yuxi_dash.ui.loaders import clear_loaders

    clear_loaders()
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at.switch_page(PAGE).run()
    assert not at.exception
    assert _listed(at) == _store_actionable(demo_env_postgres)
    target = _first_idle_capable(demo_env_postgres)
    at.selectbox(key="compress_thread").set_value(target).run()
    at.button(key="compress_one").click().run()
    at.button(key="confirm_compress").click().run()
    assert not at.exception
    lines = [s.value for s in at.success]
    assert len(lines) == 1 and lines[0].startswith(f"{target}: compressed ")
    assert _listed(at) == _store_actionable(demo_env_postgres)


def test_a_thread_with_nothing_to_summarize_is_not_offered_and_says_why(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 29 item 6: a no-op compress (insufficient_history) is neither the default nor
    in a selection, and its row says why."""
    import sqlalchemy as sa

    from yuxi_dash.service import compress_readiness
    from yuxi_dash.store.models import Conversation

    actionable = _store_actionable(demo_env)
    readiness = compress_readiness(actionable)
    idle = [t for t in actionable if readiness[t].reason == "insufficient_history"]
    assert idle, "the demo has hot threads with too little history to summarize"
    with session_scope(demo_env) as session:  # the no-op thread at the top of the list
        session.execute(
            sa.update(Conversation)
            .where(Conversation.thread_id == idle[0])
            .values(summary_pressure_ratio=9.0)
        )
    at = app_test(PAGE)
    assert not at.exception
    assert _listed(at)[0] == idle[0]
    box = at.selectbox(key="compress_thread")
    assert box.value not in idle and box.value in actionable
    assert not set(idle) & set(at.multiselect(key="compress_selection").options)
    notes = at.dataframe[0].value.set_index("thread")["note"]
    for thread_id in idle:  # the kind in the row, the whole note in the list under the table
        assert notes[thread_id] == "nothing to summarize"
    # the other notes are forecasts (issue 40), never "nothing to summarize"
    others = notes[(notes != "") & ~notes.index.isin(idle)]
    assert all(n.startswith("100% in ") for n in others), others.tolist()
    why = at.dataframe[1].value.set_index("thread")["why"]
    assert set(why.index) == set(idle)
    for thread_id in idle:
        assert why[thread_id] == readiness[thread_id].note
        assert why[thread_id].startswith("nothing to summarize: ")
    assert "tool results among the kept messages" in " ".join(why)
    box.set_value(idle[0]).run()
    assert any(
        c.value.startswith("Compress would change nothing: nothing to summarize")
        for c in at.caption
    )


def _numbers(text: str, pattern: str) -> list[int]:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return [int(n.replace(",", "")) for n in match.groups()]


def test_the_hidden_count_says_what_it_is_made_of(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 item 8: "30 hidden" and "27 cannot be compressed here" visibly add up."""
    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=100_000)
    here = sum(not t.capable for t in hot)
    busy = sum(t.capable and t.busy_reason is not None for t in hot)
    assert here and busy, "the demo has unsupported and busy hot threads"
    at = app_test(PAGE)
    assert not at.exception
    hidden = len(hot) - len(_listed(at))
    captions = [c.value for c in at.caption]
    line = next(c for c in captions if "are hidden" in c)
    made_of = (
        r"([\d,]+) threads .* hidden: ([\d,]+) cannot be compressed here and ([\d,]+) are busy"
    )
    assert _numbers(line, made_of) == [hidden, here, busy] and hidden == here + busy
    cannot = next(c for c in captions if "of these threads cannot be compressed here" in c)
    assert _numbers(cannot, r"^([\d,]+) of these")[0] == here


def test_an_attached_thread_the_platform_can_compress_is_not_counted_as_impossible(
    app_test: Callable[..., AppTest], demo_env: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37 item 8: with YUXI_DASH_PLATFORM_URL set, an attached thread has a working
    Compress button, so "cannot be compressed here" does not count it."""
    import sqlalchemy as sa

    from yuxi_dash.store.models import Conversation, ScanWatermark

    with session_scope(demo_env) as session:
        hot = list_threads(session, min_pressure=0.85, limit=100_000)
        target = next(t.thread_id for t in hot if t.capable and not t.busy_reason)
        session.execute(
            sa.update(Conversation)
            .where(Conversation.thread_id == target)
            .values(origin="attached")
        )
        session.add(ScanWatermark(source=PLATFORM, checkpoint_id="x", threads=1))
    unsupported = sum(not t.capable for t in hot)
    monkeypatch.setenv("YUXI_DASH_PLATFORM_URL", "http://127.0.0.1:9")  # never called here
    get_settings.cache_clear()
    at = _show_all(app_test(PAGE))
    assert not at.exception
    at.selectbox(key="compress_thread").set_value(target).run()
    assert not at.button(key="compress_one").disabled  # the platform compresses it
    cannot = next(c.value for c in at.caption if "cannot be compressed here" in c.value)
    assert cannot == (
        f"{unsupported:,} of these threads cannot be compressed here: {unsupported:,} because "
        "their agent does not support context compression."
    )


CHAR_PX, PAD_PX, ICON_PX = 7.2, 16, 18  # a 14 px header letter, the cell padding, help / menu


def test_headers_and_notes_are_whole_in_their_columns(
    app_test: Callable[..., AppTest], demo_env: Settings
) -> None:
    """Issue 37 item 8: no header and no note is cut off at 1440 px (979 px for the table)."""
    at = _show_all(app_test(PAGE))
    assert not at.exception
    table = at.dataframe[0]
    columns = json.loads(table.proto.columns)
    shown = list(table.value.columns)
    widths = {c: columns[c]["width"] for c in shown}
    assert sum(widths.values()) <= 979, widths
    for column in shown:
        label = columns[column].get("label") or ""
        assert len(label) * CHAR_PX + PAD_PX + ICON_PX <= widths[column], (column, label)
    notes = [n for n in table.value["note"] if n]
    assert notes and all(len(n) * CHAR_PX + PAD_PX <= widths["note"] for n in notes), notes
