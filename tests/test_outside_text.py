"""What an outside server's words become before we show, log or audit them (`outside_text`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuxi_dash.outside_text import (
    REDACTED,
    escaped_controls,
    redacted,
    safe_line,
    secrets_of,
)
from yuxi_dash.settings import Settings


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),  # an ESC sequence is inert text
        ("a\nb\r\nc\td", "a\\nb\\r\\nc\\td"),
        ("nul\x00 bell\x07 del\x7f", "nul\\x00 bell\\x07 del\\x7f"),
        ("csi\x9b1m nel\x85", "csi\\x9b1m nel\\x85"),  # C1 too
        ("abc\u202edef", "abc\\u202edef"),  # a bidi override cannot reorder the line
        ("lone \ud800", "lone \\ud800"),
        ("plain → 中文 ok\\x1b", "plain → 中文 ok\\x1b"),  # printable text is left as it is
    ],
)
def test_every_control_character_is_written_out(raw: str, shown: str) -> None:
    assert escaped_controls(raw) == shown
    assert all(c.isprintable() for c in escaped_controls(raw))


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("you sent Bearer abc.def-123", f"you sent Bearer {REDACTED}"),
        ("you sent bearer abc", f"you sent bearer {REDACTED}"),
        ("Authorization: Basic dXNlcjpwdw==", f"Authorization: Basic {REDACTED}"),
        ('{"authorization": "tok-42"}', f'{{"authorization": "{REDACTED}"}}'),
        ("proxy-authorization=xyz; next", f"proxy-authorization={REDACTED}; next"),
        ("no credential here", "no credential here"),
    ],
)
def test_credentials_in_the_text_are_redacted(raw: str, shown: str) -> None:
    assert redacted(raw) == shown


def test_each_configured_secret_is_redacted_wherever_it_is() -> None:
    text = "x=s3cret-LONG;y=s3cret-LONG-and-more;z=abc"
    assert redacted(text, ["s3cret-LONG", "s3cret-LONG-and-more", "abc"]) == (
        f"x={REDACTED};y={REDACTED};z=abc"  # longest first; too short to be told from words
    )


def test_safe_line_redacts_before_it_cuts_and_escapes() -> None:
    secret = "tok-SECRET-1234567890"
    line = safe_line("x" * 290 + secret + "\x1b", secrets=[secret], limit=300)
    assert "tok-" not in line and "SECRET" not in line  # no prefix of it survives the cut
    assert len(line) == 300 and line.endswith("[redacted…")
    whole = safe_line("x" * 20 + secret + "\x1b", secrets=[secret])
    assert whole == "x" * 20 + REDACTED + "\\x1b"
    cut = safe_line("y" * 400, limit=50)
    assert len(cut) == 50 and cut.endswith("…")


def test_secrets_come_from_the_settings_and_the_token_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("file-token-9876\n")
    settings = Settings(
        platform_token="env-token-1234",
        platform_token_file=token_file,
        alert_webhook_secret="hook-secret-5555",
    )
    assert set(secrets_of(settings)) >= {"env-token-1234", "file-token-9876", "hook-secret-5555"}
    assert secrets_of(Settings(platform_token_file=tmp_path / "missing")) == ()
