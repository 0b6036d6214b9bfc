"""The platform client's own rules: its settings, the label, Retry-After, Server-Timing.

The calls themselves are tested against the stand-in platform's real server
(`tests/platform/test_compress.py`); these are the parts that need no server.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import httpx
import pytest

from yuxi_dash.errors import PlatformMisconfigured
from yuxi_dash.platform.client import (
    PlatformClient,
    _retry_after,
    _server_timing,
    platform_label,
)
from yuxi_dash.settings import Settings

SECRET = "tok-SECRET-42"


def test_the_label_names_scheme_host_and_port_only() -> None:
    assert platform_label("https://platform.internal:8443/base") == "https://platform.internal:8443"
    assert platform_label("http://10.0.0.5") == "http://10.0.0.5"


@pytest.mark.parametrize(
    "url",
    ["ftp://host", "platform.internal", "https://user:pw@host", "https://host/?token=x", ""],
)
def test_an_unusable_url_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(PlatformMisconfigured) as caught:
        PlatformClient(Settings(platform_url=url or " "))
    assert "YUXI_DASH_PLATFORM_URL" in caught.value.message
    assert "pw" not in caught.value.message and "token=x" not in caught.value.message


def test_the_token_file_must_be_readable_and_not_empty(tmp_path: Path) -> None:
    with pytest.raises(PlatformMisconfigured, match="cannot read YUXI_DASH_PLATFORM_TOKEN_FILE"):
        PlatformClient(Settings(platform_url="http://h", platform_token_file=tmp_path / "none"))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(PlatformMisconfigured, match="is empty"):
        PlatformClient(Settings(platform_url="http://h", platform_token_file=empty))


def test_the_token_is_never_in_a_repr() -> None:
    settings = Settings(platform_url="http://h:1", platform_token=SECRET)
    client = PlatformClient(settings)
    try:
        assert SECRET not in repr(client) and SECRET not in repr(settings)
    finally:
        client.close()


def test_retry_after_in_seconds_or_as_a_date() -> None:
    def answer(value: str) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": value})

    assert _retry_after(answer("7")) == 7.0
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (_retry_after(answer(later)) or 0) <= 31
    assert _retry_after(answer("soon")) is None
    assert _retry_after(httpx.Response(503)) is None


def test_server_timing_is_the_platform_handling_time() -> None:
    assert _server_timing(httpx.Response(200, headers={"Server-Timing": "app;dur=12.5"})) == 12.5
    assert _server_timing(httpx.Response(200, headers={"Server-Timing": "app"})) is None
    assert _server_timing(httpx.Response(200)) is None
