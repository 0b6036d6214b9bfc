"""The shared paging flags of the listing commands (`yuxi_dash.cli.arguments.add_page_flags`)."""

from __future__ import annotations

import pytest

from yuxi_dash.cli import build_parser


@pytest.mark.parametrize(
    ("command", "limit", "offset_help"),
    [
        ("threads", 50, "skip the first N (default: 0)"),
        ("tool-results", 200, "skip the first N, newest first (default: 0)"),
    ],
)
def test_listing_commands_share_the_paging_flags(
    command: str, limit: int, offset_help: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = build_parser()
    args = parser.parse_args([command])
    assert (args.limit, args.offset) == (limit, 0)
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
