"""The agent workdir: offloaded tool results and conversation history files.

The on-disk layout:
- ``.yuxi-dash-workdir``: the marker :meth:`Workdir.initialize` writes on first set-up; a
  root without it is ``workdir_unavailable``, and only ``initialize`` creates the root.
- ``outputs/large_tool_results/{safe_tool}-{sha256[:16]}.txt``: one file per distinct
  content; the file is the truth, its SHA-256 is in the saved-result header. Writing a copy
  that is already there touches it (the orphan sweep's clock).
- ``outputs/conversation_history/session_<id>.md``: a thread's summarized parts as keyed
  sections (:meth:`Workdir.write_history_section`); beside it, each summary's evidence index.

Every path below the root is opened through :mod:`yuxi_dash.files.safe_fs` (each component
relative to its parent's descriptor, ``O_NOFOLLOW``): a symlink is ``PathRefused``. A pass
(:meth:`Workdir.writing_pass`) walks to a directory once. Other write failures are
``OSError``, so the engine leaves that message as it was.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from yuxi_dash.errors import InvalidInput, PathRefused, WorkdirUnavailable
from yuxi_dash.files import safe_fs

TOOL_RESULTS_DIR = "outputs/large_tool_results"
HISTORY_DIR = "outputs/conversation_history"
MARKER_NAME = ".yuxi-dash-workdir"
_OUTPUT_DIRS = (TOOL_RESULTS_DIR, HISTORY_DIR)
_MARKER_TEXT = b"yuxi-dash workdir: created by `yuxi-dash db upgrade` or the demo; keep this file\n"
_ENCODING = "utf-8"
_ENCODING_ERRORS = "surrogatepass"  # lone surrogates round-trip byte for byte instead of raising
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_TOOL_RESULTS_PREFIX = TOOL_RESULTS_DIR + "/"
_TOOL_RESULTS_PARTS = tuple(TOOL_RESULTS_DIR.split("/"))
_PLAIN_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # no separator, dot or NUL first
_HASH_CHUNK = 1 << 20
_MAX_KEY = 2**63 - 1

# A history section: begin marker (key, exact payload length), payload, end marker.
# The length makes a section's own text (chat content may imitate a marker) opaque.
_SECTION_BEGIN = re.compile(
    rb"<!-- yuxi-dash:history-section key=(\d{1,19}) bytes=(\d{1,19}) -->\n"
)
_LEGACY_KEY = -1


class SavedFile(NamedTuple):
    """One offloaded tool result: where it lives (workdir-relative, posix) and what it holds.

    A named tuple (immutable, made once per offloaded result on the engine's hot path,
    where a frozen dataclass's ``__init__`` cost three times as much)."""

    path: str
    sha256: str
    chars: int
    approx_tokens: int


@dataclass(frozen=True)
class HistorySection:
    """One part of a history file: ``key`` is the first message index it covers.

    Text no marker delimits (files from before keyed sections) has key -1.
    """

    key: int
    text: str


def approx_tokens_for_chars(chars: int) -> int:
    """The engine's size rule: characters / 4, rounded up."""
    return -(-chars // 4)


def encode_text(text: str) -> bytes:
    """The exact bytes a saved file holds for ``text`` (UTF-8, lone surrogates kept)."""
    return text.encode(_ENCODING, _ENCODING_ERRORS)


def _decode(data: bytes) -> str:
    return data.decode(_ENCODING, _ENCODING_ERRORS)


def safe_name(name: str, *, fallback: str, max_length: int = 64) -> str:
    """A file-name fragment: ``[A-Za-z0-9_.-]`` only, no leading dots, never empty."""
    cleaned = _UNSAFE_NAME_CHARS.sub("_", name).lstrip(".")[:max_length]
    return cleaned or fallback


def _tool_result_prefix(tool_name: str) -> str:
    """``outputs/large_tool_results/{safe_tool}-``."""
    return f"{TOOL_RESULTS_DIR}/{safe_name(tool_name, fallback='tool')}-"


def tool_result_relpath(tool_name: str, sha256: str) -> str:
    """The content-addressed path of a tool result, relative to the workdir root."""
    return f"{_tool_result_prefix(tool_name)}{sha256[:16]}.txt"


def history_relpath(session_id: str) -> str:
    """The history file of one session, relative to the workdir root."""
    return f"{HISTORY_DIR}/session_{safe_name(session_id, fallback='default', max_length=128)}.md"


def _section_end(key: int) -> bytes:
    return b"<!-- /yuxi-dash:history-section key=%d -->\n" % key


def render_history_section(key: int, data: bytes) -> bytes:
    """One keyed section as it is stored: begin marker, ``data`` verbatim, end marker."""
    return (
        b"<!-- yuxi-dash:history-section key=%d bytes=%d -->\n" % (key, len(data))
        + data
        + _section_end(key)
    )


def parse_history(data: bytes) -> list[tuple[int, bytes]]:
    """A history file as (key, payload) chunks in file order; unmarked text is key -1.

    A marker-like line is a section only if its payload length and matching end
    marker check out, so text outside sections (legacy appends) is kept as is.
    """
    chunks: list[tuple[int, bytes]] = []
    gap_start = search_from = 0
    while (match := _SECTION_BEGIN.search(data, search_from)) is not None:
        key, length = int(match.group(1)), int(match.group(2))
        end = match.end() + length
        closing = _section_end(key)
        if key > _MAX_KEY or data[end : end + len(closing)] != closing:
            search_from = match.start() + 1
            continue
        if match.start() > gap_start:
            chunks.append((_LEGACY_KEY, data[gap_start : match.start()]))
        chunks.append((key, data[match.end() : end]))
        gap_start = search_from = end + len(closing)
    if gap_start < len(data):
        chunks.append((_LEGACY_KEY, data[gap_start:]))
    return chunks


def _unavailable(root: Path) -> WorkdirUnavailable:
    return WorkdirUnavailable(
        f"workdir {root} is missing or not initialized; run `yuxi-dash db upgrade` to create it"
    )


class _PassDirs(threading.local):
    """The directory descriptors of the writing pass open in this thread (None: no pass)."""

    dirs: dict[tuple[str, ...], int] | None = None


class Workdir:
    """A directory the engine may write offloaded results and history files under."""

    def __init__(self, root: Path | str) -> None:
        self.root: Path = Path(root).expanduser().absolute()
        self._pass = _PassDirs()  # per thread: a pass in one thread never lends another its fds

    def __repr__(self) -> str:
        return f"Workdir({str(self.root)!r})"

    # -- set-up and health -----------------------------------------------------
    @contextmanager
    def _root_fd(self) -> Iterator[int]:
        """The root, opened once for one operation; WorkdirUnavailable when it is not there."""
        try:
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise _unavailable(self.root) from exc
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def _dir_fd(self, dir_parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        with self._root_fd() as root_fd, safe_fs.walk(root_fd, dir_parts, create=create) as fd:
            yield fd

    def initialize(self) -> bool:
        """First set-up: create the root and its marker; True if newly marked.

        Only set-up commands call this (``yuxi-dash db upgrade``, the demo, the
        first start on an empty database); everything else refuses a missing root.
        The output dirs are made by the first write (or ``ensure_writable``) under
        the marked root, so an absent history dir still means "nothing written".
        """
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            with self._root_fd() as root_fd:
                created = safe_fs.link_new_file(root_fd, MARKER_NAME, _MARKER_TEXT)
                os.close(safe_fs.open_regular(root_fd, MARKER_NAME))  # PathRefused if a link
                return created
        except OSError as exc:
            raise WorkdirUnavailable(
                f"workdir {self.root} could not be created ({type(exc).__name__}); "
                "check YUXI_DASH_WORKDIR"
            ) from exc

    def is_initialized(self) -> bool:
        """Whether the root exists and carries the marker (a regular file, not a link)."""
        try:
            with self._root_fd() as root_fd:
                os.close(safe_fs.open_regular(root_fd, MARKER_NAME))
        except (WorkdirUnavailable, PathRefused, OSError):
            return False
        return True

    def ensure_writable(self) -> None:
        """Check the root is there and marked, and prove a file can be written in it.

        Never creates the root: a missing root or marker is ``workdir_unavailable``.
        """
        if not self.is_initialized():
            raise _unavailable(self.root)
        try:
            with self._root_fd() as root_fd:
                for sub in _OUTPUT_DIRS:
                    with safe_fs.walk(root_fd, tuple(sub.split("/")), create=True):
                        pass
                probe = f".probe-{uuid.uuid4().hex}"  # unique: compresses run side by side
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                fd = os.open(probe, flags, 0o600, dir_fd=root_fd)
                try:
                    safe_fs.write_all(fd, b"ok")
                finally:
                    os.close(fd)
                    os.unlink(probe, dir_fd=root_fd)
        except (OSError, PathRefused) as exc:
            raise WorkdirUnavailable(
                f"workdir {self.root} is not writable ({type(exc).__name__}); "
                "check YUXI_DASH_WORKDIR"
            ) from exc

    # -- tool results ----------------------------------------------------------
    def save_tool_result(self, tool_name: str, content: str) -> SavedFile:
        """Write ``content`` to its content-addressed file (once); raise OSError on failure."""
        saved, data = self.prepare_tool_result(tool_name, content)
        self.write_prepared(saved, data)
        return saved

    def prepare_tool_result(self, tool_name: str, content: str) -> tuple[SavedFile, bytes]:
        """Hash ``content`` and name its file, without touching the disk (the CPU half of a save)."""
        data = encode_text(content)
        digest = hashlib.sha256(data).hexdigest()
        chars = len(content)
        saved = SavedFile(
            tool_result_relpath(tool_name, digest), digest, chars, approx_tokens_for_chars(chars)
        )
        return saved, data

    @contextmanager
    def writing_pass(self) -> Iterator[None]:
        """One pass of writes (a compaction): each directory walked once, not once per file.

        Inside the pass, ``write_prepared`` opens a directory the first time it writes
        there (the same symlink-proof walk from a freshly opened root) and reuses that
        descriptor for every later file of the pass, in this thread; all are closed
        when the pass ends. A write that fails drops its directory's descriptor, so the
        next one walks again (and makes the directory again if it was removed). The
        directory written to is the one the walk found: renaming it meanwhile moves
        the pass's files with it, as renaming it after the pass would. Nested passes
        share the outer one.
        """
        state = self._pass
        if state.dirs is not None:
            yield
            return
        state.dirs = {}
        try:
            yield
        finally:
            dirs, state.dirs = state.dirs, None
            for fd in dirs.values():
                os.close(fd)

    def write_prepared(self, saved: SavedFile, data: bytes) -> None:
        """Write a prepared result unless an identical copy exists (the I/O half).

        OSError on a failed write; PathRefused if a link sits on the path;
        WorkdirUnavailable if the root is gone.
        """
        parts, name = _split_saved_path(saved.path)
        opened = self._pass.dirs
        if opened is None:
            with self._dir_fd(parts, create=True) as dir_fd:
                _publish(dir_fd, name, saved.sha256, data)
            return
        held = opened.get(parts)
        if held is None:
            with self._root_fd() as root_fd:
                held = opened[parts] = safe_fs.open_dirs(root_fd, parts, create=True)
        try:
            _publish(held, name, saved.sha256, data)
        except BaseException:
            del opened[parts]  # the next write of the pass walks (and checks) the path again
            os.close(held)
            raise

    # -- history ---------------------------------------------------------------
    def write_history_section(self, session_id: str, key: int, text: str) -> str:
        """Store ``text`` as the section ``key`` of the session's history; its relative path.

        ``key`` is the first message index the section covers. Every section with
        a key >= ``key`` is removed first (left by attempts that never committed, or
        an earlier try of this one), so a retry replaces instead of duplicating;
        unmarked legacy text is kept as it is. The file is rewritten whole (temp
        file, fsync, rename in the directory already open): never partly written,
        never through a link (PathRefused).
        """
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= _MAX_KEY:
            raise InvalidInput("a history section key must be a non-negative integer")
        relative = history_relpath(session_id)
        *dirs, name = safe_fs.split_relative(relative)
        with self._dir_fd(tuple(dirs), create=True) as dir_fd:
            try:
                current = safe_fs.read_bytes_at(dir_fd, name)
            except FileNotFoundError:
                current = b""
            kept = b"".join(
                payload if chunk_key == _LEGACY_KEY else render_history_section(chunk_key, payload)
                for chunk_key, payload in parse_history(current)
                if chunk_key < key
            )
            new = kept + render_history_section(key, encode_text(text))
            safe_fs.replace_file(dir_fd, name, new, durable=True)
        return relative

    def write_file(self, relative_path: str, text: str) -> None:
        """Write ``text`` as a whole file (temp file, fsync, rename; never through a link)."""
        *dirs, name = safe_fs.split_relative(relative_path)
        with self._dir_fd(tuple(dirs), create=True) as dir_fd:
            safe_fs.replace_file(dir_fd, name, encode_text(text), durable=True)

    def read_history_sections(self, session_id: str) -> list[HistorySection]:
        """The sections of the session's history file in file order ([] if there is none)."""
        try:
            data = self._read_bytes(history_relpath(session_id))
        except FileNotFoundError:
            return []
        return [HistorySection(key, _decode(payload)) for key, payload in parse_history(data)]

    # -- reads -----------------------------------------------------------------
    def resolve(self, relative_path: str) -> Path:
        """Where ``relative_path`` lies under the root, for display; PathRefused if it leaves it.

        Purely lexical (``..``, absolute, NUL are refused): never open the result,
        use the read and write methods, which refuse links at open time.
        """
        return self.root.joinpath(*safe_fs.split_relative(relative_path))

    def _read_bytes(self, relative_path: str) -> bytes:
        """A whole file's bytes; FileNotFoundError when it (or a directory on its path) is absent."""
        *dirs, name = safe_fs.split_relative(relative_path)
        try:
            with self._dir_fd(tuple(dirs)) as dir_fd:
                return safe_fs.read_bytes_at(dir_fd, name)
        except NotADirectoryError as exc:  # a plain file where a directory should be
            raise FileNotFoundError(f"no such file in the workdir: {relative_path}") from exc

    def read_text(self, relative_path: str, *, offset: int = 0, limit: int | None = None) -> str:
        """Characters ``[offset, offset+limit)`` of a file (FileNotFoundError when missing)."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError("offset and limit must be non-negative")
        text = _decode(self._read_bytes(relative_path))
        end = None if limit is None else offset + limit
        return text[offset:end]

    def read_verified(
        self, relative_path: str, sha256: str
    ) -> tuple[str, Literal["ok", "mismatch"]]:
        """The whole file's text and whether its bytes still hash to ``sha256``, in one read.

        FileNotFoundError when missing. A file that is no longer valid UTF-8 (it was
        damaged: we only ever write valid text) is decoded with replacement
        characters so it can still be looked at; its status is then "mismatch".
        """
        data = self._read_bytes(relative_path)
        status: Literal["ok", "mismatch"] = (
            "ok" if hashlib.sha256(data).hexdigest() == sha256.lower() else "mismatch"
        )
        try:
            text = _decode(data)
        except UnicodeDecodeError:
            text = data.decode(_ENCODING, "replace")
        return text, status

    def verify(self, relative_path: str, sha256: str) -> Literal["ok", "mismatch", "missing"]:
        """Re-hash a saved file against the digest recorded when it was written.

        PathRefused for a path that leaves the root or crosses a link.
        """
        *dirs, name = safe_fs.split_relative(relative_path)
        try:
            with self._dir_fd(tuple(dirs)) as dir_fd:
                actual = _sha256_at(dir_fd, name)
        except (FileNotFoundError, NotADirectoryError):
            return "missing"
        return "ok" if actual == sha256.lower() else "mismatch"

    def has_file(self, relative_path: str) -> bool:
        """Whether a regular file is at ``relative_path`` (opened, nothing read).

        PathRefused for a path that leaves the root or crosses a link.
        """
        *dirs, name = safe_fs.split_relative(relative_path)
        try:
            with self._dir_fd(tuple(dirs)) as dir_fd:
                os.close(safe_fs.open_regular(dir_fd, name))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def tool_result_entries(self) -> list[tuple[str, bool, float]]:
        """(name, is a regular file, mtime) of each entry of the results directory, links not
        followed ([] when the directory is not there yet)."""
        try:
            with self._dir_fd(_TOOL_RESULTS_PARTS) as dir_fd:
                return safe_fs.list_entries(dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove_stale_tool_results(self, names: list[str], older_than: float) -> list[str]:
        """Unlink these results-directory files not modified since ``older_than``; the
        workdir paths of those removed (a link or a file touched since is left)."""
        removed: list[str] = []
        try:
            with self._dir_fd(_TOOL_RESULTS_PARTS) as dir_fd:
                for name in names:
                    if safe_fs.unlink_if_stale(dir_fd, name, older_than):
                        removed.append(_TOOL_RESULTS_PREFIX + name)
        except (FileNotFoundError, NotADirectoryError):
            pass
        return removed

    def remove_file(self, relative_path: str) -> bool:
        """Unlink one file (never through a link on its path); False if it was not there."""
        *dirs, name = safe_fs.split_relative(relative_path)
        try:
            with self._dir_fd(tuple(dirs)) as dir_fd:
                os.unlink(name, dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True


def _split_saved_path(relative_path: str) -> tuple[tuple[str, ...], str]:
    """(directories, file name) of a saved file's path; PathRefused if it leaves the root.

    A plain name directly in the results directory (what ``tool_result_relpath``
    makes) is split without the general parser; anything else goes through it.
    """
    if relative_path.startswith(_TOOL_RESULTS_PREFIX):
        name = relative_path[len(_TOOL_RESULTS_PREFIX) :]
        if _PLAIN_FILE_NAME.fullmatch(name):
            return _TOOL_RESULTS_PARTS, name
    *dirs, name = safe_fs.split_relative(relative_path)
    return tuple(dirs), name


def _publish(dir_fd: int, name: str, sha256: str, data: bytes) -> None:
    """``data`` under ``name`` in ``dir_fd``, whole: kept if an intact copy is there.

    A kept copy is touched (its mtime set to now): the orphan sweep's grace period
    then counts from this write, not from whoever wrote the copy first.
    """
    if safe_fs.link_new_file(dir_fd, name, data):
        return
    if _sha256_at(dir_fd, name, touch_if=sha256) != sha256:
        # a tampered (or old partial) copy: replace it whole
        safe_fs.replace_file(dir_fd, name, data)


def _sha256_at(dir_fd: int, name: str, *, touch_if: str | None = None) -> str:
    """The file's SHA-256; with ``touch_if``, its mtime set to now when the digest is that."""
    digest = hashlib.sha256()
    fd = safe_fs.open_regular(dir_fd, name)
    try:
        while chunk := os.read(fd, _HASH_CHUNK):
            digest.update(chunk)
        if touch_if is not None and digest.hexdigest() == touch_if:
            try:
                os.utime(fd)
            except OSError:  # another owner's file: kept as it is
                pass
    finally:
        os.close(fd)
    return digest.hexdigest()
