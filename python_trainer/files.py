"""Writing a file so that it is either whole or not there: the one atomic writer every output goes through.

    write_atomic(path, text_or_bytes)                 # small files: JSON, policy files, reports
    with atomic_output(path) as tmp: save_to(tmp)     # a writer that wants a path (torch.save, savefig, ffmpeg)

The data goes to a temporary name beside the destination (same folder, so the rename is atomic), then replaces it:
a crash, Ctrl-C or a full disk during the write leaves the previous file intact and no partial file behind.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator, Union


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
