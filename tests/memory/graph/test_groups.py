"""derive_group_id: `user_` + id; ValueError when sanitising would change the id."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yuxi_dash.memory import derive_group_id, user_id_from_group


def test_plain_ids_get_the_prefix() -> None:
    assert derive_group_id("alice_chen") == "user_alice_chen"
    assert derive_group_id("A-1_b") == "user_A-1_b"
    assert derive_group_id("x" * 128) == "user_" + "x" * 128


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "alice chen",
        "alice'})-[r]-() DELETE r //",
        "../etc/passwd",
        "a/b",
        "a.b",
        "ünïcode",
        "x" * 129,
        "alice\n",
        "`user`",
    ],
)
def test_ids_that_would_change_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        derive_group_id(bad)


@given(
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=140)
)
def test_accepted_ids_are_exactly_the_safe_ones(user_id: str) -> None:
    safe = len(user_id) <= 128 and all(c.isascii() and (c.isalnum() or c in "_-") for c in user_id)
    if safe:
        assert derive_group_id(user_id) == "user_" + user_id
        assert user_id_from_group("user_" + user_id) == user_id
    else:
        with pytest.raises(ValueError):
            derive_group_id(user_id)


def test_foreign_graph_names_are_not_users() -> None:
    assert user_id_from_group("bench") is None
    assert user_id_from_group("user_a b") is None
