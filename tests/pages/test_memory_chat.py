"""AppTest: chat vs memory — the user's words beside the facts, suspects first."""

from __future__ import annotations


def test_chat_vs_memory(memory_pages) -> None:
    at = memory_pages("memory_chat.py", "alice_chen")
    assert not at.exception
    assert any("dark mode last week" in m.value for m in at.markdown)
    assert not any("Noted: you prefer" in m.value for m in at.markdown)  # only the user's words
    table = at.dataframe[0].value
    assert table["suspect"].iloc[0]  # suspects first
    assert not table["suspect"].iloc[-1]
    suspects = table[table["suspect"]]
    assert (suspects["source_kind"] == "user_asserted").all()
    supported = table[table["supported_by_chat"]]
    assert supported["fact"].str.contains("answers in Polish").any()


def test_chat_vs_memory_on_the_demo_tells_one_story(
    demo_env, demo_graphs, falkordb_dir, demo_flags_file, monkeypatch
) -> None:
    """Demo threads and demo graph of one user: statements supported, the planted one first."""
    from streamlit.testing.v1 import AppTest

    from tests.fixtures.graph import REPO
    from yuxi_dash.demo.plan import planted_facts
    from yuxi_dash.settings import get_settings
    from yuxi_dash.sim.story import user_statements
    from yuxi_dash.ui.memory import clear_memory_caches
    from yuxi_dash.ui.page_text import markdown_literal

    monkeypatch.setenv("YUXI_DASH_FALKORDB_DIR", str(falkordb_dir))  # the seeded graphs
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()
    clear_memory_caches()
    user, name = "bruno_silva", "Bruno Silva"
    at = AppTest.from_file(str(REPO / "app_pages" / "memory_chat.py"), default_timeout=60)
    at.session_state["memory_user"] = user
    at.run()
    assert not at.exception
    statements = user_statements(user)
    suspect, derived = planted_facts(user)
    shown = " ".join(m.value for m in at.markdown).lower()
    # the user's own words, from the demo threads, shown literally (markdown escaped)
    assert markdown_literal(statements[0].said).lower() in shown
    table = at.dataframe[0].value
    first = table.iloc[0]
    assert (first["fact"], first["source_kind"], bool(first["suspect"])) == (
        suspect.fact_for(name),
        "user_asserted",
        True,
    )
    assert not table["suspect"].iloc[1:].any()  # the planted claim is the only suspect
    asserted = table[table["source_kind"] == "user_asserted"]
    supported = set(asserted[asserted["supported_by_chat"]]["fact"])
    # the statements, and the mirrored pair with the manager or team the user named
    mirrored = {f for f in supported if " works with " in f}
    assert len(mirrored) == 2 and supported - mirrored == {s.fact_for(name) for s in statements}
    told = table[table["fact"] == derived.fact_for(name)]
    assert list(told["source_kind"]) == ["assistant_derived"] and not told["suspect"].any()
