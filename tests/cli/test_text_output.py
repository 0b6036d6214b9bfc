"""What a person reads from the CLI: words and numbers, never Python reprs.

In process (`yuxi_dash.cli.main`) on the seeded demo (threads) and the demo graphs on a
real FalkorDB server (memory): no dict, list or long-float repr, ids without thousands
separators, `threads` says how many of how many, its --help names the defaults, and
`flags USER` exits 6 when memory is gated off, as the README says.
"""

from __future__ import annotations

import json
import re

import pytest

from yuxi_dash.cli import main
from yuxi_dash.settings import Settings, get_settings
from yuxi_dash.store.db import session_scope
from yuxi_dash.store.queries import count_threads, list_threads
from yuxi_dash.tool_results.index import list_tool_results
from yuxi_dash.wording import pct

# a dict or list repr ({'a': 1}, ['Organization']), a float with four decimals, None/True/False
REPR = re.compile(r"\{'|'\}|\['|'\]|': |\d\.\d{4}\b|\bNone\b|\bTrue\b|\bFalse\b")
STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def text_of(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def cli_memory(demo_graphs, memory_settings, demo_flags_file, monkeypatch) -> None:
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(demo_flags_file))
    get_settings.cache_clear()


def test_threads_says_how_many_of_how_many(
    demo_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with session_scope(demo_env) as session:
        total = count_threads(session)
        hot = list_threads(session, limit=1)[0]
    code, text = text_of(capsys, "threads")
    assert code == 0
    assert f"50 of {total:,} threads" in text and "--offset 50 for more" in text
    assert "--status deleted" in text  # where the deleted ones are
    assert pct(hot.summary_pressure_ratio) in text.splitlines()[2]  # as every page shows it
    code, text = text_of(capsys, "threads", "--offset", str(total + 10))
    assert code == 0 and f"none at offset {total + 10}: {total:,} threads match" in text
    assert not REPR.search(text)


def test_threads_help_gives_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["threads", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 50)" in text and "(default: 0)" in text
    assert "(default: active and archived; deleted only when asked)" in text


def test_actor_help_is_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    role = "the role comes from YUXI_DASH_CLI_ROLE, default operator"
    for argv, fallback in (
        (["compress", "--help"], "required unless YUXI_DASH_CLI_ACTOR is set"),
        (["import-thread", "--help"], "default: YUXI_DASH_CLI_ACTOR, else cli"),
        (["memory", "stats", "--help"], "default: YUXI_DASH_CLI_ACTOR, else cli"),
        (["memory", "index-health", "--help"], "default: YUXI_DASH_CLI_ACTOR, else cli"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert f"--actor NAME the name the audit log records as acting ({fallback}); {role}" in (
            text
        ), argv
        assert "one is needed" not in text and ") (" not in text, argv


def test_tool_result_ids_have_no_thousands_separators(
    demo_env: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    with session_scope(demo_env) as session:
        newest = list_tool_results(session, limit=1)[0]
    assert newest.id >= 1000, "the demo should offload more than 999 tool results"
    code, text = text_of(capsys, "tool-results", "--limit", "1")
    assert code == 0
    row = text.splitlines()[2].split()
    assert row[0] == str(newest.id)  # "1595", not "1,595"
    assert row[2] == "ours"  # whose thread: the demo's own
    assert row[4] == f"{newest.chars:,}"  # counts keep theirs


def test_memory_text_has_no_python_reprs(cli_memory, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = text_of(capsys, "memory", "stats", "alice_chen")
    assert code == 0 and "facts_by_status: " in text
    status_line = next(line for line in text.splitlines() if line.startswith("facts_by_status"))
    assert re.fullmatch(r"facts_by_status: (\w+ [\d,]+)(, \w+ [\d,]+)*", status_line)
    for argv in (
        ["memory", "stats", "alice_chen"],
        ["memory", "entities", "alice_chen", "--limit", "5"],
        ["memory", "facts", "alice_chen", "--limit", "5"],
        ["memory", "communities", "alice_chen"],
        ["memory", "ratification", "alice_chen"],
        ["memory", "index-health", "alice_chen"],
        ["flags", "alice_chen"],
    ):
        code, text = text_of(capsys, *argv)
        assert code == 0, argv
        assert not REPR.search(text), (argv, REPR.search(text), text)
    code, text = text_of(capsys, "memory", "facts", "alice_chen", "--limit", "3")
    assert all(STAMP.search(line) for line in text.splitlines()[2:])  # ISO with offset no more
    # each fact's uuid, whole, as the correction commands take it
    assert text.splitlines()[0].split()[0] == "uuid"
    uuids = [line.split()[0] for line in text.splitlines()[2:] if line.strip()]
    assert len(uuids) == 3 and all(re.fullmatch(r"[0-9a-f-]{36}", u) for u in uuids)
    code, text = text_of(capsys, "memory", "ratification", "alice_chen")
    ages = [line.split()[-3] for line in text.splitlines()[4:] if line.strip()]
    assert ages and all(re.fullmatch(r"[\d,]+\.\d", age) for age in ages)  # "109.6"


def test_the_entities_pager_says_where_the_last_page_is(
    cli_memory, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = text_of(capsys, "memory", "entities", "alice_chen", "--limit", "5")
    assert code == 0
    total = int(re.search(r"of ([\d,]+) entities", text).group(1).replace(",", ""))
    assert text.startswith(f"1–5 of {total:,} entities; --offset 5 for more")
    last = (total - 1) // 5 * 5  # pages of 5: alice has a dozen entities
    code, text = text_of(
        capsys, "memory", "entities", "alice_chen", "--limit", "5", "--offset", str(last)
    )
    assert text.startswith(f"{last + 1:,}–{total:,} of {total:,} entities\n")
    code, text = text_of(
        capsys, "memory", "entities", "alice_chen", "--limit", "5", "--offset", "100000"
    )
    assert code == 0
    assert text.strip() == (
        f"{total:,} entities; none at offset 100000 (the last page is --offset {last})"
    )


def test_flags_in_words_and_exit_6_when_memory_is_gated_off(
    cli_memory, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = text_of(capsys, "flags", "alice_chen")
    assert code == 0
    assert text.splitlines()[0] == (
        "graphiti-memory: on (no target or rule matched: the flag's default)"
    )
    code, text = text_of(capsys, "flags", "dmitri_ivanov")  # targeted off in the demo flags
    assert code == 6
    assert text.splitlines()[0] == "graphiti-memory: off (the user is targeted individually)"
    for raw in ("TARGET_MATCH", "FALLTHROUGH", "True", "False"):
        assert raw not in text


def test_flags_exit_6_with_no_launchdarkly_at_all(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, text = text_of(capsys, "flags", "alice_chen")
    assert code == 6
    assert "graphiti-memory: off (LaunchDarkly is not configured)" in text


LD_HINT = "set LAUNCHDARKLY_SDK_KEY or YUXI_DASH_LD_FLAGS_FILE (the demo's flag file is "


def test_gated_off_with_no_launchdarkly_says_how_to_configure_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from yuxi_dash.demo.flags import DEMO_FLAGS_FILE

    code = main(["memory", "stats", "alice_chen"])
    err = capsys.readouterr().err
    assert code == 6 and err.count("\n") == 1  # still one line
    assert err.startswith("yuxi-dash: memory is gated off for alice_chen: graphiti-memory is off")
    assert f"{LD_HINT}{DEMO_FLAGS_FILE}) [memory_gated_off]" in err
    code = main(["memory", "facts", "alice_chen", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 6 and error["code"] == "memory_gated_off" and LD_HINT in error["message"]
    code, text = text_of(capsys, "memory", "index-health", "alice_chen")
    assert code == 6
    code, text = text_of(capsys, "flags", "alice_chen")
    assert code == 6 and f"memory is gated off for every user: {LD_HINT}" in text


def test_gated_off_by_a_flag_file_has_no_configuration_hint(
    tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from yuxi_dash.demo.flags import write_demo_flags

    users = ["ann", "ben", "cid", "dee"]  # the demo gates every 7th user from the 4th off
    monkeypatch.setenv("YUXI_DASH_LD_FLAGS_FILE", str(write_demo_flags(users, tmp_path / "f.json")))
    get_settings.cache_clear()
    code = main(["memory", "stats", "dee"])
    err = capsys.readouterr().err
    assert code == 6 and "the user is targeted individually" in err
    assert "LAUNCHDARKLY_SDK_KEY" not in err
    code, text = text_of(capsys, "flags", "dee")
    assert code == 6 and "LAUNCHDARKLY_SDK_KEY" not in text
