"""Symlink-proof file access below one directory: the fd-walking primitives of the workdir.

Owns how a path inside the workdir is opened, created, replaced and removed. A
path is never opened as a whole string: the root is opened once per operation,
then every component is opened relative to its parent's directory file
descriptor with ``O_NOFOLLOW`` (``os.open(name, flags, dir_fd=fd)``), so no
component can be a symlink, whenever it was swapped in. A final file must be a
regular file (``fstat``: ``S_ISREG``); FIFOs are opened non-blocking so they are
refused, not waited on. A symlink (or a non-regular file) anywhere in the path
raises :class:`~yuxi_dash.errors.PathRefused`. Checking ``Path.resolve()`` and
then calling ``open()`` is not confinement: a link can be swapped in between.

The root path itself is the operator's configured setting and may contain
symlinks (a mount point, say); only what lies below it is confined.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath

from yuxi_dash.errors import PathRefused

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
# Files and directories made here are the owner's only: tool results and histories hold
# users' data (replicas share the workdir as one user).
_FILE_MODE = 0o600
_DIR_MODE = 0o700
_NOFOLLOW = os.O_NOFOLLOW
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | _CLOEXEC
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
_READ_CHUNK = 1 << 20
_temp_names = itertools.count()

# Linux: an unnamed file (O_TMPFILE) given its name only once whole (linkat via /proc).
ANONYMOUS_FILES = hasattr(os, "O_TMPFILE") and os.path.isdir("/proc/self/fd")
_ANONYMOUS_FLAGS = getattr(os, "O_TMPFILE", 0) | os.O_WRONLY | _CLOEXEC
_ANONYMOUS_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV}


def split_relative(relative_path: str) -> tuple[str, ...]:
    """The components of a workdir-relative path; PathRefused if it is not one.

    Refused: empty, NUL, absolute (posix or Windows style), any ``..``. ``\\`` is a
    separator; empty and ``.`` components are dropped.
    """
    if not isinstance(relative_path, str) or not relative_path.strip() or "\x00" in relative_path:
        raise PathRefused("path refused: empty or malformed workdir path")
    normalized = relative_path.replace("\\", "/")
    posix = PurePosixPath(normalized)
    windows_drive = len(normalized) > 1 and normalized[1] == ":"
    if posix.is_absolute() or windows_drive or ".." in posix.parts:
        raise PathRefused("path refused: it must stay inside the workdir")
    parts = tuple(part for part in posix.parts if part not in ("", "."))
    if not parts:
        raise PathRefused("path refused: empty or malformed workdir path")
    return parts


def _is_symlink_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _refuse_link(name: str) -> PathRefused:
    return PathRefused("path refused: a symlink inside the workdir is never followed")


def open_dir(parent_fd: int, name: str, *, create: bool = False) -> int:
    """Open directory ``name`` in ``parent_fd`` without following a link (mkdir if asked)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            raise
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_symlink_at(parent_fd, name):
            raise _refuse_link(name) from None
        if exc.errno == errno.ELOOP:
            raise _refuse_link(name) from None
        raise
    try:
        os.mkdir(name, _DIR_MODE, dir_fd=parent_fd)
    except FileExistsError:
        pass  # made by someone else meanwhile: open whatever is there, still without following
    return open_dir(parent_fd, name, create=False)


def open_dirs(root_fd: int, dir_parts: tuple[str, ...], *, create: bool = False) -> int:
    """A new fd of the directory ``root/dir_parts``, each step opened with O_NOFOLLOW.

    The caller owns (and closes) the returned descriptor; ``root_fd`` stays open.
    """
    if not dir_parts:
        return os.dup(root_fd)
    fd = open_dir(root_fd, dir_parts[0], create=create)
    try:
        for name in dir_parts[1:]:
            child = open_dir(fd, name, create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def walk(root_fd: int, dir_parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """The fd of the directory ``root/dir_parts`` (see ``open_dirs``), closed on exit."""
    fd = open_dirs(root_fd, dir_parts, create=create)
    try:
        yield fd
    finally:
        os.close(fd)


def open_regular(dir_fd: int, name: str) -> int:
    """Open ``name`` in ``dir_fd`` for reading: no link, and a regular file only."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse_link(name) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathRefused("path refused: not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _READ_CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def read_bytes_at(dir_fd: int, name: str) -> bytes:
    """The whole content of regular file ``name`` in ``dir_fd`` (FileNotFoundError if absent)."""
    fd = open_regular(dir_fd, name)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)  # a regular file takes it in one write, but for a signal
    if written < len(data):  # or a full disk: the rest, for as long as it is taken
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def link_new_file(dir_fd: int, name: str, data: bytes) -> bool:
    """Create ``name`` in ``dir_fd`` holding ``data``; False if the name is already taken.

    The name only ever holds a whole file: a write that fails half-way, or a
    crash, leaves nothing under it. Linux: the bytes go to an unnamed file in the
    directory, which is then linked under the name (an exclusive create).
    Elsewhere: a dot-named temp file next to it, then one rename.
    """
    global ANONYMOUS_FILES
    if ANONYMOUS_FILES:  # written out here, not in a helper: this runs once per offloaded result
        try:
            fd = os.open(".", _ANONYMOUS_FLAGS, _FILE_MODE, dir_fd=dir_fd)
            try:
                write_all(fd, data)
                try:
                    # linkat(AT_SYMLINK_FOLLOW) of the open file into the directory we hold;
                    # an existing name (a symlink included) is never replaced or followed.
                    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
                except FileExistsError:
                    return False
            finally:
                os.close(fd)  # an unlinked unnamed file is freed here
            return True
        except OSError as exc:
            if exc.errno not in _ANONYMOUS_UNSUPPORTED:
                raise
            ANONYMOUS_FILES = False  # this system or filesystem cannot: the portable way
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return False
    except FileNotFoundError:
        pass
    replace_file(dir_fd, name, data)
    return True


def replace_file(dir_fd: int, name: str, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to a fresh temp name in ``dir_fd``, then rename it over ``name``.

    The rename replaces whatever entry ``name`` is (a symlink itself, never its
    target). ``durable``: fsync the file before the rename and the directory after.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
    while True:
        temp = f".{name[:100]}.{os.getpid()}-{next(_temp_names)}.tmp"
        try:
            fd = os.open(temp, flags, _FILE_MODE, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue  # a stale temp of an earlier process with the same pid: next name
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise
    if durable:
        os.fsync(dir_fd)


def list_entries(dir_fd: int) -> list[tuple[str, bool, float]]:
    """(name, is a regular file, mtime) of every entry of ``dir_fd``, no link followed.

    A symlink is reported as itself (not a regular file), whatever it points at.
    """
    entries: list[tuple[str, bool, float]] = []
    with os.scandir(dir_fd) as scan:  # scandir works on a duplicate: dir_fd stays open
        for entry in scan:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed meanwhile
            entries.append((entry.name, stat.S_ISREG(info.st_mode), info.st_mtime))
    return entries


def unlink_if_stale(dir_fd: int, name: str, older_than: float) -> bool:
    """Unlink regular file ``name`` in ``dir_fd`` if its mtime is before ``older_than``.

    The entry is checked without following a link (``lstat``) and ``unlink`` never
    follows one, so a symlink (or whatever it points at) is never removed. False
    when it is not there, not a regular file, or modified since ``older_than``.
    """
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode) or info.st_mtime >= older_than:
        return False
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    return True
