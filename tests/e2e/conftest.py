"""The attach fixtures (a platform database, its runner, the stand-in server) for the platform browser test."""

from __future__ import annotations

from tests.attach.conftest import (  # noqa: F401 - fixtures
    attached,
    platform,
    platform_configured,
    platform_server,
)
