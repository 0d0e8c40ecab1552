"""Reading a file argument (--demos, --curriculum, a demonstration file to append to, a run's args.json): regular
files only, read once, in memory bounded by the file's size, as bytes or as UTF-8 text.

    text = read_text(path, f"--curriculum {path}", EnvParamError, "a TOML file")   # or read_bytes(...)
    check_regular(path, label, error)                                              # before a reader that wants a path

A FIFO, a device (/dev/zero, /dev/urandom), a socket or a folder is refused in one line, before anything is read
from it: a FIFO would block forever, a device would fill memory. A process substitution (``--demos <(zcat f.gz)``)
is a pipe, so it is refused too, and the line says to write it to a file first. A file is read in one pass of at
most the size it had when it was opened, so a file that grows meanwhile cannot grow memory; text is UTF-8 (a BOM is
accepted), and another encoding is one line naming the byte where it fails.
"""

from __future__ import annotations

import os
import stat
from typing import Type

from python_trainer.base.errors import UserError

PROCESS_SUBSTITUTION = "a process substitution such as <(zcat f.gz) is one: write it to a file first (zcat f.gz > f)"


class InputError(UserError):
    """A file argument that cannot be read: missing, not a regular file, or not UTF-8 text; one line naming the file
    and the fix."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refusal(label: str, mode: int, what: str) -> str:
    kind = _kind(mode)
    if stat.S_ISFIFO(mode):
        fix = f"give {what} on disk; {PROCESS_SUBSTITUTION} and give that file"
    elif stat.S_ISDIR(mode):
        fix = f"give {what} in it"
    else:
        fix = f"give {what} on disk"
    return f"{label}: {kind}, not a regular file: {fix}"


def check_regular(path, label: str, error: Type[UserError] = InputError, what: str = "a file") -> os.stat_result:
    """The stat of ``path`` when it is a regular file (symlinks followed), else ``error`` in one line: missing,
    unreadable, or a FIFO, device, socket or folder (``label`` names it as the user gave it, ``what`` says what to give
    instead: "a TOML file")."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e}): check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(_refusal(label, st.st_mode, what))
    return st


def read_bytes(path, label: str, error: Type[UserError] = InputError, what: str = "a file") -> bytes:
    """The bytes of the regular file ``path``, read once and at most its size when opened (check_regular's refusals
    first; the open cannot block: O_NONBLOCK, and the opened file is checked again)."""
    check_regular(path, label, error, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e}): check the path") from None
    try:
        st = os.fstat(fd)  # the file opened, in case the path was replaced since check_regular
        if not stat.S_ISREG(st.st_mode):
            raise error(_refusal(label, st.st_mode, what))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read(st.st_size)
    except OSError as e:
        raise error(f"{label}: cannot read it ({e.strerror or e}): check the path") from None
    finally:
        if fd >= 0:
            os.close(fd)


def decode_text(data: bytes, label: str, error: Type[UserError] = InputError, what: str = "a file") -> str:
    """``data`` as UTF-8 text (a leading BOM dropped), else ``error`` naming the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        found = "UTF-16 text" if utf16 else f"not UTF-8 text (byte {e.start}: {data[e.start:e.start + 1]!r})"
        raise error(f"{label}: {found}: give {what} in UTF-8 (save it as UTF-8, or convert it: iconv -t UTF-8)") from None


def read_text(path, label: str, error: Type[UserError] = InputError, what: str = "a file") -> str:
    """read_bytes, then decode_text: the regular file ``path`` as UTF-8 text, read once."""
    return decode_text(read_bytes(path, label, error, what), label, error, what)
