"""The replay's workdir: the engine writes into memory here, never to disk.

`DryWorkdir` is a `files.workdir.Workdir` whose writes (offloaded results, history
sections, evidence indexes) land in a dict, and whose reads see only those writes.
The engine's own functions (`compression.auto_compact`) run on it unchanged, so a
replay is the engine's path with nothing written anywhere. One per replayed thread:
it holds that thread's offloads and is dropped with it.

Rule: no method touches the disk. Its root is a path that cannot exist (under
``/dev/null``), its `_root_fd` raises `WorkdirUnavailable`, and set-up (`initialize`,
`ensure_writable`) refuses, so any `Workdir` method it does not override raises
instead of working on a directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, NoReturn

from yuxi_dash.errors import WorkdirUnavailable
from yuxi_dash.files.workdir import (
    HistorySection,
    SavedFile,
    Workdir,
    encode_text,
    history_relpath,
    parse_history,
    render_history_section,
)

NO_ROOT = Path("/dev/null/yuxi-dash-dry-workdir")  # under a device file: never a directory


def _refused() -> WorkdirUnavailable:
    return WorkdirUnavailable("the replay's workdir is in memory: it has no directory")


class DryWorkdir(Workdir):
    """A workdir in memory: every write is kept here, every read comes from here."""

    def __init__(self) -> None:
        super().__init__(NO_ROOT)
        self.files: dict[str, bytes] = {}

    def __repr__(self) -> str:
        return f"DryWorkdir({len(self.files)} files)"

    @contextmanager
    def _root_fd(self) -> Iterator[int]:
        raise _refused()
        yield 0  # pragma: no cover - a generator, never reached

    def initialize(self) -> NoReturn:
        raise _refused()

    def is_initialized(self) -> bool:
        return False

    def ensure_writable(self) -> NoReturn:
        raise _refused()

    @contextmanager
    def writing_pass(self) -> Iterator[None]:
        yield

    def write_prepared(self, saved: SavedFile, data: bytes) -> None:
        self.files[saved.path] = data

    def write_history_section(self, session_id: str, key: int, text: str) -> str:
        relative = history_relpath(session_id)
        current = self.files.get(relative, b"")
        kept = b"".join(
            render_history_section(chunk_key, payload)
            for chunk_key, payload in parse_history(current)
            if chunk_key < key
        )
        self.files[relative] = kept + render_history_section(key, encode_text(text))
        return relative

    def write_file(self, relative_path: str, text: str) -> None:
        self.files[relative_path] = encode_text(text)

    def read_history_sections(self, session_id: str) -> list[HistorySection]:
        data = self.files.get(history_relpath(session_id))
        if data is None:
            return []
        return [
            HistorySection(key, payload.decode("utf-8", "replace"))
            for key, payload in parse_history(data)
        ]

    def _read_bytes(self, relative_path: str) -> bytes:
        try:
            return self.files[relative_path]
        except KeyError:
            raise FileNotFoundError(f"no such file in the replay: {relative_path}") from None

    def has_file(self, relative_path: str) -> bool:
        return relative_path in self.files

    def verify(self, relative_path: str, sha256: str) -> Literal["ok", "mismatch", "missing"]:
        if relative_path not in self.files:
            return "missing"
        _text, status = self.read_verified(relative_path, sha256)
        return status
