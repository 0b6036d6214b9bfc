"""The shared paging flags of the listing commands (`yuxi_dash.cli.arguments.add_page_flags`)."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest

from yuxi_dash.cli import build_parser, main


@pytest.mark.parametrize(
    ("command", "limit", "offset_help", "parsed"),
    [
        ("threads", 50, "skip the first N (default: 0)", (50, 0)),
        # not given is None there: `--verify` then checks every file, a listing shows 200
        ("tool-results", 200, "skip the first N, newest first (default: 0)", (None, None)),
    ],
)
def test_listing_commands_share_the_paging_flags(
    command: str,
    limit: int,
    offset_help: str,
    parsed: tuple[int | None, int | None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = build_parser()
    args = parser.parse_args([command])
    assert (args.limit, args.offset) == parsed
    assert parser.parse_args([command, "--limit", "7", "--offset", "3"]).limit == 7
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"at most N (default: {limit})" in help_text and offset_help in help_text


@pytest.mark.parametrize("flags", [["--limit", "0"], ["--offset", "-1"]])
def test_a_page_out_of_range_is_a_usage_error(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["threads", *flags])
    assert exited.value.code == 2


def test_tool_results_verify_says_how_it_pages(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["tool-results", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "re-hash every file, or only the listed page when --limit or --offset is given" in (
        help_text
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [("lots", "not a number"), ("85%", "0.85 means 85%"), ("-0.1", "out of range"), ("inf", "")],
)
def test_a_ratio_that_is_no_ratio_is_a_usage_error(
    value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["threads", "--min-pressure", value])
    out, err = capsys.readouterr()
    assert exited.value.code == 2 and problem in err and not out


def test_one_calls_json_never_changes_the_next_calls_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--json` asks for JSON usage errors of that call only (nested subcommands too)."""
    with pytest.raises(SystemExit) as exited:
        main(["memory", "server", "bogus", "--json"])
    assert exited.value.code == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["code"] == "usage" and not err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["memory", "server", "bogus"])
    out, err = capsys.readouterr()
    assert not out and err.startswith("yuxi-dash: argument action: invalid choice")


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"yuxi-dash {version('yuxi-dash')}"
