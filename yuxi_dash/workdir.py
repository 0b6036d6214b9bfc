"""The agent workdir: offloaded tool results and conversation history files.

Owns the on-disk layout the compression engine writes to (DESIGN §4):

- ``outputs/large_tool_results/{safe_tool}-{sha256[:16]}.txt`` — one file per
  distinct tool-result content (content-addressed: the same content twice is one
  file); the file is the truth, its SHA-256 is recorded in the saved-result header.
- ``outputs/conversation_history/session_<id>.md`` — the summarized part of a
  thread, appended (never overwritten) before the summary message points at it.

Every path handed in from outside goes through :meth:`Workdir.resolve`, which
refuses anything that would leave the root (``..``, absolute paths, symlinks
pointing out). Write failures surface as ``OSError`` so the engine can leave the
message it was offloading untouched.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from yuxi_dash.errors import PathRefused, WorkdirUnavailable

TOOL_RESULTS_DIR = "outputs/large_tool_results"
HISTORY_DIR = "outputs/conversation_history"
_ENCODING = "utf-8"
_ENCODING_ERRORS = "surrogatepass"  # lone surrogates round-trip byte for byte instead of raising
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_HASH_CHUNK = 1 << 20


@dataclass(frozen=True)
class SavedFile:
    """One offloaded tool result: where it lives (workdir-relative, posix) and what it holds."""

    path: str
    sha256: str
    chars: int
    approx_tokens: int


def approx_tokens_for_chars(chars: int) -> int:
    """The engine's size rule: characters / 4, rounded up."""
    return math.ceil(chars / 4)


def encode_text(text: str) -> bytes:
    """The exact bytes a saved file holds for ``text`` (UTF-8, lone surrogates kept)."""
    return text.encode(_ENCODING, _ENCODING_ERRORS)


def sha256_text(text: str) -> str:
    return hashlib.sha256(encode_text(text)).hexdigest()


def safe_name(name: str, *, fallback: str, max_length: int = 64) -> str:
    """A file-name fragment: ``[A-Za-z0-9_.-]`` only, no leading dots, never empty."""
    cleaned = _UNSAFE_NAME_CHARS.sub("_", name).lstrip(".")[:max_length]
    return cleaned or fallback


def tool_result_relpath(tool_name: str, sha256: str) -> str:
    """The content-addressed path of a tool result, relative to the workdir root."""
    return f"{TOOL_RESULTS_DIR}/{safe_name(tool_name, fallback='tool')}-{sha256[:16]}.txt"


def history_relpath(session_id: str) -> str:
    """The history file of one session, relative to the workdir root."""
    return f"{HISTORY_DIR}/session_{safe_name(session_id, fallback='default', max_length=128)}.md"


class Workdir:
    """A directory the engine may write offloaded results and history files under."""

    def __init__(self, root: Path | str) -> None:
        self.root: Path = Path(root).expanduser().absolute()

    def __repr__(self) -> str:
        return f"Workdir({str(self.root)!r})"

    # -- health --------------------------------------------------------------
    def ensure_writable(self) -> None:
        """Create the root and output dirs and prove a file can be written there."""
        try:
            for sub in (TOOL_RESULTS_DIR, HISTORY_DIR):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=self.root, prefix=".probe-", delete=True) as probe:
                probe.write(b"ok")
                probe.flush()
        except OSError as exc:
            raise WorkdirUnavailable(
                f"workdir is not writable ({type(exc).__name__}); check YUXI_DASH_WORKDIR"
            ) from exc

    # -- writes --------------------------------------------------------------
    def save_tool_result(self, tool_name: str, content: str) -> SavedFile:
        """Write ``content`` to its content-addressed file (once); raise OSError on failure."""
        saved, data = self.prepare_tool_result(tool_name, content)
        self.write_prepared(saved, data)
        return saved

    def prepare_tool_result(self, tool_name: str, content: str) -> tuple[SavedFile, bytes]:
        """Hash ``content`` and name its file, without touching the disk (the CPU half of a save)."""
        data = encode_text(content)
        digest = hashlib.sha256(data).hexdigest()
        saved = SavedFile(
            path=tool_result_relpath(tool_name, digest),
            sha256=digest,
            chars=len(content),
            approx_tokens=approx_tokens_for_chars(len(content)),
        )
        return saved, data

    def write_prepared(self, saved: SavedFile, data: bytes) -> None:
        """Write a prepared result unless an identical copy exists (the I/O half); OSError on failure."""
        target = os.path.join(self.root, saved.path)
        if not _write_new_file(target, data) and _file_sha256(target) != saved.sha256:
            _write_then_rename(target, data)  # a tampered (or old partial) copy: replace it whole

    def append_history(self, session_id: str, text: str) -> str:
        """Append ``text`` to the session's history file; return its relative path."""
        relative = history_relpath(session_id)
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "ab") as handle:
            handle.write(encode_text(text))
            handle.flush()
            os.fsync(handle.fileno())
        return relative

    # -- reads ---------------------------------------------------------------
    def resolve(self, relative_path: str) -> Path:
        """The absolute path of ``relative_path`` inside the root; PathRefused if it leaves it."""
        if (
            not isinstance(relative_path, str)
            or not relative_path.strip()
            or "\x00" in relative_path
        ):
            raise PathRefused("path refused: empty or malformed workdir path")
        posix = PurePosixPath(relative_path.replace("\\", "/"))
        if posix.is_absolute() or Path(relative_path).is_absolute() or ".." in posix.parts:
            raise PathRefused("path refused: it must stay inside the workdir")
        root = self.root.resolve()
        candidate = (root / Path(*posix.parts)).resolve()
        if candidate != root and not candidate.is_relative_to(root):
            raise PathRefused("path refused: it resolves outside the workdir")
        return candidate

    def read_text(self, relative_path: str, *, offset: int = 0, limit: int | None = None) -> str:
        """Characters ``[offset, offset+limit)`` of a file (FileNotFoundError when missing)."""
        if offset < 0 or (limit is not None and limit < 0):
            raise ValueError("offset and limit must be non-negative")
        target = self.resolve(relative_path)
        text = target.read_bytes().decode(_ENCODING, _ENCODING_ERRORS)
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
        data = self.resolve(relative_path).read_bytes()
        status: Literal["ok", "mismatch"] = (
            "ok" if hashlib.sha256(data).hexdigest() == sha256.lower() else "mismatch"
        )
        try:
            text = data.decode(_ENCODING, _ENCODING_ERRORS)
        except UnicodeDecodeError:
            text = data.decode(_ENCODING, "replace")
        return text, status

    def verify(self, relative_path: str, sha256: str) -> Literal["ok", "mismatch", "missing"]:
        """Re-hash a saved file against the digest recorded when it was written."""
        target = self.resolve(relative_path)
        if not target.is_file():
            return "missing"
        try:
            actual = _file_sha256(target)
        except FileNotFoundError:
            return "missing"
        return "ok" if actual == sha256.lower() else "mismatch"


def _file_sha256(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


_temp_names = itertools.count()
# Linux: an unnamed file (O_TMPFILE) given its name only once whole (linkat via /proc).
_ANONYMOUS_FILES = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
_ANONYMOUS_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV}


def _write_new_file(target: str, data: bytes) -> bool:
    """Create ``target`` with ``data``; False if it already exists (left untouched).

    The final name only ever holds a whole file: a write that fails half-way, or
    a crash, leaves nothing under it. Linux: the bytes go to an unnamed file in
    the target's directory, which is then linked under the final name (an
    exclusive create: no existence check needed). Elsewhere: a dot-named temp
    file next to it, then one rename.
    """
    global _ANONYMOUS_FILES
    if _ANONYMOUS_FILES:
        try:
            return _link_new_file(target, data)
        except OSError as exc:
            if exc.errno not in _ANONYMOUS_UNSUPPORTED:
                raise
            _ANONYMOUS_FILES = False  # this system or filesystem cannot: the portable way
    try:
        os.stat(target)
        return False
    except FileNotFoundError:
        pass
    _write_then_rename(target, data)
    return True


def _link_new_file(target: str, data: bytes) -> bool:
    """Write ``data`` to an unnamed file beside ``target`` and link it there; False if taken."""
    directory = os.path.dirname(target)
    flags = os.O_TMPFILE | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(directory, flags, 0o644)
    except FileNotFoundError:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(directory, flags, 0o644)
    try:
        _write_all(fd, data)
        try:
            # linkat(AT_SYMLINK_FOLLOW) of the open file; the absolute path makes the
            # dir fd unused, but passing one is what makes os.link follow the link.
            os.link(f"/proc/self/fd/{fd}", target, src_dir_fd=fd)
        except FileExistsError:
            return False
    finally:
        os.close(fd)  # an unlinked unnamed file is freed here
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _write_then_rename(target: str, data: bytes) -> None:
    """Write ``data`` to a fresh temp name beside ``target``, then rename it over ``target``."""
    directory, name = os.path.split(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    made_dirs = False
    while True:
        temp = os.path.join(directory, f".{name}.{os.getpid()}-{next(_temp_names)}.tmp")
        try:
            fd = os.open(temp, flags, 0o644)
            break
        except FileExistsError:
            continue  # a stale temp of an earlier process with the same pid: next name
        except FileNotFoundError:
            if made_dirs:
                raise
            os.makedirs(directory, exist_ok=True)
            made_dirs = True
    try:
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:
            pass
        raise
