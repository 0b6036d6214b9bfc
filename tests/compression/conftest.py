"""Fixtures of the compression tests (builders live in tests/compression/builders.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from yuxi_dash.files.workdir import Workdir


@pytest.fixture
def workdir(tmp_path: Path) -> Workdir:
    """A fresh workdir under the test's temp dir (not created until something is written)."""
    return Workdir(tmp_path / "workdir")
