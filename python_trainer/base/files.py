"""Writing a file so that it is either whole or not there: the one atomic writer every output goes through, the
check of a destination before the work that fills it, and the scratch folders of the work.

    check_output(path, rough_bytes)                   # before a long job (a recording, a profile): OutputError now
    write_atomic(path, text_or_bytes)                 # small files: JSON, policy files, reports
    with atomic_output(path) as tmp: save_to(tmp)     # a writer that wants a path (torch.save, savefig, ffmpeg)
    with scratch_dir("godot-ppo-record-") as tmp: ... # a temporary folder; those of killed processes are removed

The data goes to a temporary name beside the destination (same folder, so the rename is atomic), then replaces it:
a crash, Ctrl-C or a full disk during the write leaves the previous file intact and no partial file behind.
`write_error` says an OSError met on the way in one line (a full disk, a read-only place, a path under a file).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Union

import psutil

from python_trainer.base.errors import UserError

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class OutputError(UserError):
    """An output that cannot be written where it was asked for: the folder cannot be made (a path under a file),
    nothing can be created there (read-only), or the disk has no room; the message names the path and the fix."""


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno in DISK_FULL


def write_error(path, e: OSError) -> OutputError:
    """An OSError met while writing ``path``, as one line with the fix (nothing of the file was kept)."""
    reason = e.strerror or str(e) or type(e).__name__
    if e.errno in DISK_FULL:
        fix = "the disk is full: free some space or write elsewhere"
    elif e.errno == errno.EROFS:
        fix = "that file system is read-only: write elsewhere"
    elif e.errno in (errno.EACCES, errno.EPERM):
        fix = "give a folder you may write to"
    elif e.errno in (errno.ENOTDIR, errno.EEXIST):
        fix = "a part of that path is a file, not a folder: give a path in a folder"
    else:
        fix = "write elsewhere"
    return OutputError(f"cannot write {path} ({reason}): {fix}")


def check_output(path, rough_bytes: int = 0, folder: bool = False) -> Path:
    """Before the work whose result goes to ``path`` (a file; with ``folder``, a folder of outputs): its folder is
    made when missing, a file can be created there (a temporary one, removed at once) and the disk has about
    ``rough_bytes`` free. OutputError in one line otherwise: a path under a file, a read-only place, no room."""
    path = Path(path)
    where = path if folder else path.parent
    if not folder and path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder; give a file name")
    for parent in (where, *where.parents):  # the nearest part of the path that exists must be a folder
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise OutputError(f"cannot write {path}: {parent} is a file, not a folder; give a path in a folder")
            break
    try:
        where.mkdir(parents=True, exist_ok=True)
        probe = temporary_name(where / ".godot-ppo-probe" if folder else path)
        with open(probe, "wb"):
            pass
        probe.unlink()
        free = shutil.disk_usage(where).free
    except OSError as e:
        raise write_error(path, e) from None
    if free < rough_bytes:
        raise OutputError(f"cannot write {path}: it needs about {_size(rough_bytes)} and {where} has "
                          f"{_size(free)} free; free some space or write elsewhere")
    return path


def _size(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


def remove_stale_scratch(prefix: str, root=None) -> list:
    """Remove the scratch folders PREFIX<pid>-... in ``root`` (default: the temp dir) of this user whose process no
    longer runs (a SIGKILL runs no clean-up); a folder of a running process stays. Returns those removed."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for d in root.glob(f"{prefix}*"):
        pid = d.name[len(prefix):].split("-", 1)[0]
        try:
            mine = d.is_dir() and not d.is_symlink() and d.stat().st_uid == os.getuid()
        except OSError:
            continue
        if pid.isdigit() and mine and not psutil.pid_exists(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


@contextlib.contextmanager
def scratch_dir(prefix: str, root=None) -> Iterator[Path]:
    """A temporary folder PREFIX<pid>-XXXX (in ``root``, default the temp dir), removed when the block ends; the
    ones killed processes left behind are removed first (`remove_stale_scratch`)."""
    remove_stale_scratch(prefix, root)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{os.getpid()}-", dir=root) as d:
        yield Path(d)


def temporary_name(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place: hidden, named for the writing process, and with
    the same suffix (matplotlib, Pillow and ffmpeg choose the format from it)."""
    return path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")


@contextlib.contextmanager
def atomic_output(path, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; when the block ends without an error it replaces ``path`` (after an
    fsync with ``fsync=True``), and on any error it is removed."""
    path = Path(path)
    tmp = temporary_name(path)
    try:
        yield tmp
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_atomic(path, data: Union[str, bytes], fsync: bool = False) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` atomically; returns the path."""
    path = Path(path)
    with atomic_output(path, fsync=fsync) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return path
