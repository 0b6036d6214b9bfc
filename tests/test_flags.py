"""LaunchDarkly gates through the real SDK: TestData, the Files source, and not configured."""

from __future__ import annotations

import json
from pathlib import Path

from ldclient.integrations.test_data import TestData

from yuxi_dash.demo.flags import demo_flags
from yuxi_dash.flags import FlagEvaluator, get_flag_evaluator, user_context
from yuxi_dash.settings import Settings


def test_not_configured_means_everything_off() -> None:
    gates = FlagEvaluator.from_settings(Settings()).gates("alice")
    assert gates.source == "not_configured"
    assert not gates.memory_on and not gates.communities_on
    assert gates.memory.reason == "not configured"
    assert gates.to_dict() == {
        "graphiti-memory": {"value": False, "reason": "not configured"},
        "graphiti-communities-enabled": {"value": False, "reason": "not configured"},
    }


def test_test_data_targets_and_reasons() -> None:
    td = TestData.data_source()
    td.update(td.flag("graphiti-memory").variation_for_all(True).variation_for_user("bob", False))
    td.update(td.flag("graphiti-communities-enabled").variation_for_all(False))
    evaluator = FlagEvaluator.from_test_data(Settings(), td)
    try:
        alice = evaluator.gates("alice")
        assert alice.memory_on and alice.memory.reason == "FALLTHROUGH"
        assert not alice.communities_on
        bob = evaluator.gates("bob")
        assert not bob.memory_on and bob.memory.reason == "TARGET_MATCH"
        td.update(td.flag("graphiti-communities-enabled").variation_for_all(True))
        assert evaluator.gates("alice").communities_on
        assert not evaluator.gates("bob").communities_on  # communities need memory too
    finally:
        evaluator.close()


def test_flag_keys_are_configurable() -> None:
    td = TestData.data_source()
    td.update(td.flag("mem-v2").variation_for_all(True))
    evaluator = FlagEvaluator.from_test_data(Settings(memory_flag_key="mem-v2"), td)
    try:
        assert evaluator.gates("alice").memory.key == "mem-v2"
        assert evaluator.gates("alice").memory_on
    finally:
        evaluator.close()


def test_context_is_the_user_with_email_and_role() -> None:
    context = user_context("alice", email="a@example.com", role="user")
    assert context.key == "alice" and context.kind == "user"
    assert context.get("email") == "a@example.com" and context.get("role") == "user"


def test_rules_on_context_attributes_are_honoured() -> None:
    td = TestData.data_source()
    td.update(
        td.flag("graphiti-memory")
        .fallthrough_variation(False)
        .if_match("role", "user")
        .then_return(True)
    )
    evaluator = FlagEvaluator.from_test_data(Settings(), td)
    try:
        gates = evaluator.gates("alice", role="user")
        assert gates.memory_on and gates.memory.reason.startswith("RULE_MATCH")
        assert not evaluator.gates("alice").memory_on
    finally:
        evaluator.close()


def test_files_source_from_settings(tmp_path: Path) -> None:
    users = ["u0", "u1", "u2", "u3", "u4"]
    path = tmp_path / "flags.json"
    path.write_text(json.dumps(demo_flags(users)))
    evaluator = get_flag_evaluator(Settings(ld_flags_file=path))
    assert evaluator.source == "file"
    assert evaluator.gates("u0").memory_on and evaluator.gates("u0").communities_on
    assert not evaluator.gates("u3").memory_on  # targeted off
    assert evaluator.gates("u3").memory.reason == "TARGET_MATCH"
    assert not evaluator.gates("u1").communities_on
    assert evaluator.gates("u1").communities.reason == "FALLTHROUGH"
    # an edited file is picked up (new mtime -> new evaluator)
    flags = demo_flags(users)
    flags["flags"]["graphiti-memory"]["on"] = False
    path.write_text(json.dumps(flags))
    import os

    os.utime(path, ns=(1, 1))
    again = get_flag_evaluator(Settings(ld_flags_file=path))
    assert again is not evaluator
    assert not again.gates("u0").memory_on and again.gates("u0").memory.reason == "OFF"
