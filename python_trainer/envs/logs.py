"""A game instance's log file: capped in size, fed from its output pipe on a thread of its own, watched for
Godot's script errors; and what of a game's output is shown.

Each instance slot's stdout+stderr go through a pipe and a reader thread (never through the step loop) into
``run_dir/logs/instance_<i>.log``, which `CappedLog` keeps under ``max_bytes`` (a game printing every frame would
otherwise fill the disk). Once the instance has handshaken, `ScriptErrorWatch` counts Godot's ``SCRIPT ERROR:`` lines
in what the thread reads, and hands on the first one at once. `shown_lines` leaves Godot's harmless lines out of
what is shown of a game's output (log tails in errors, a failed run's errors), and `HarmlessFilter` from the log
file, where they buried a game's real errors.
"""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from python_trainer.base.contract import ENGINE_AT, ENGINE_ERROR, ENGINE_SCRIPT_ERROR
from python_trainer.base.processes import LOG_TAIL_LINES, read_log_tail

DEFAULT_MAX_LOG_BYTES = 20 * 2**20  # per instance slot; a game stuck in a per-frame script error writes ~20 MB/s
# Godot's mark of an error in a game's script (the function stops there: a per-frame error freezes the agents). The
# lines that follow it ("   At: res://file.gd:12", "ERROR: ...") say where.
SCRIPT_ERROR_MARK = ENGINE_SCRIPT_ERROR.encode()
AT_MARK, AT_MARK_BYTES = ENGINE_AT + " ", ENGINE_AT.encode() + b" "  # the line after an error, "   At: file:line"
WHERE_MARKS_BYTES = (ENGINE_AT.encode(), ENGINE_ERROR.encode())  # the lines after a script error that say where
# Godot's error lines that say nothing about the game, each followed by its "   At: file.cpp:N." line. Godot 3.2
# cannot tell the modified time of an imported asset (a png, a wav) that an export loads from its .pck, and says so
# once for each at every start (godotengine/godot#25318; quiet from 3.4.1 on): 7 assets, 14 lines. The locale
# lines come with LANG=C or unset (game_environ sets LANG for our games).
HARMLESS_ERRORS = tuple(f"{ENGINE_ERROR} {what}" for what in (
    "_get_modified_time: Failed to get modified time for: ",
    "get_language_code: Invalid locale ",
    "set_locale: Unsupported locale ",
))
HARMLESS_ERRORS_BYTES = tuple(line.encode() for line in HARMLESS_ERRORS)


def shown_lines(text: str) -> list[str]:
    """The lines of a game's output that are worth showing: all but Godot's harmless errors (HARMLESS_ERRORS), each
    with the ``At:`` line after it."""
    shown, after_harmless = [], False
    for line in text.splitlines():
        if after_harmless and line.lstrip().startswith(AT_MARK):
            after_harmless = False
            continue
        after_harmless = line.startswith(HARMLESS_ERRORS)
        if not after_harmless:
            shown.append(line)
    return shown


def shown_tail(path: str | os.PathLike, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` shown lines (`shown_lines`) of a game's log file: what an error message quotes."""
    return "\n".join(shown_lines(read_log_tail(Path(path), lines=2**31))[-lines:])


class HarmlessFilter:
    """What a game prints, less Godot's harmless errors (HARMLESS_ERRORS, each with its ``At:`` line), which come at
    its start: filtered in its first ``window`` bytes only, so the log of a running game costs nothing more. A line
    is held until its end arrives (or ``end()``), as a line cannot be judged by its first bytes."""

    def __init__(self, window: int = 2**16):
        self.window, self.seen, self.partial, self.after_harmless = window, 0, b"", False

    def feed(self, chunk: bytes) -> bytes:
        if self.seen >= self.window:
            return chunk
        self.seen += len(chunk)
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        kept = []
        for line in lines:
            if self.after_harmless and line.lstrip().startswith(AT_MARK_BYTES):
                self.after_harmless = False
                continue
            self.after_harmless = line.startswith(HARMLESS_ERRORS_BYTES)
            if not self.after_harmless:
                kept.append(line + b"\n")
        if self.seen >= self.window:
            kept.append(self.end())
        return b"".join(kept)

    def end(self) -> bytes:
        """The line still held (the output ended, or the window did)."""
        held, self.partial = self.partial, b""
        return held


class CappedLog:
    """A log file that never grows past ``max_bytes``: the first half of it stays (how the game started), then one
    line saying output was cut, then a rolling tail of the newest output (at least a quarter of ``max_bytes``, what an
    error message quotes). A game that prints every frame (a script error in ``_process``) cannot fill the disk.

    `follow` copies a pipe (a game's stdout+stderr) into the log on a daemon thread of its own, so the game's output
    never passes through the step loop and costs a normal run nothing per step; `sync` copies what the pipes hold
    right now, so a log tail read after a crash holds the game's last words. ``on_flood`` is called once, the first
    time output is cut. Several pipes may follow one log in turn (a slot's restarts append to one file).
    """

    def __init__(self, path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_LOG_BYTES,
                 on_flood: Optional[Callable[[], None]] = None):
        if int(max_bytes) < 2**16:
            raise ValueError(f"max_log_bytes must be at least 64 KiB, got {max_bytes}")
        self.path = Path(path)
        self.max_bytes = int(max_bytes)
        self.on_flood = on_flood
        self.bytes_in = 0  # everything written to it, kept or cut
        self.flooded = False
        self.write_error: Optional[OSError] = None  # the first write the disk refused (its data was dropped)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._size = os.fstat(self._fd).st_size
        self._tail_start: Optional[int] = None  # where the rolling tail begins, once output has been cut
        self._lock = threading.RLock()  # on_flood runs under it, and may read the log tail
        self._pipes: dict[int, HarmlessFilter] = {}  # each followed pipe, with the filter of its start
        self._threads: list[threading.Thread] = []
        self._closed = False
        self.watch: Optional[ScriptErrorWatch] = None  # fed what the followed pipes bring (the game's output)

    def write(self, data: bytes) -> None:
        with self._lock:
            self._write(data)

    def follow(self, fd: int) -> None:
        """Copy the read end of a pipe into the log until every writer has closed it; the log then closes ``fd``."""
        os.set_blocking(fd, False)
        with self._lock:
            self._pipes[fd] = HarmlessFilter()
        thread = threading.Thread(target=self._pump, args=(fd,), name=f"log {self.path.name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def sync(self) -> None:
        """Copy into the file what the followed pipes hold now (bounded, in case a game floods them meanwhile)."""
        with self._lock:
            for fd in list(self._pipes):
                self._copy(fd, 2**20)

    def shown_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """`shown_tail` of this log after a `sync`, read under the lock: a flood's rolling tail is rewritten in place,
        and a read beside that rewrite could find the file's end moved and read nothing."""
        with self._lock:
            self.sync()
            return shown_tail(self.path, lines)

    def close(self, timeout: float = 1.0) -> None:
        """Wait up to ``timeout`` for the followed pipes to end (their processes are gone), then close the file."""
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._closed = True
            self._close_file_if_done()

    # ---------------------------------------------------------------- internals (under the lock)
    def _pump(self, fd: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        more = True
        while more:
            poller.poll()  # sleeps without the GIL until the game prints or exits
            with self._lock:
                more = self._copy(fd, 2**20)
        with self._lock:
            self._write(self._pipes.pop(fd).end())
            if self.watch is not None:
                self.watch.end()
            os.close(fd)
            self._close_file_if_done()

    def _copy(self, fd: int, limit: int) -> bool:
        """Copy up to ``limit`` bytes now in pipe ``fd``; False at its end."""
        copied = 0
        while copied < limit:
            try:
                chunk = os.read(fd, 2**16)
            except BlockingIOError:
                break
            if not chunk:
                return False
            self._write(self._pipes[fd].feed(chunk))
            if self.watch is not None:
                self.watch.feed(chunk)
            copied += len(chunk)
        return True

    def _write(self, data: bytes) -> None:
        """Append ``data`` (see `_append`). A write the disk refuses (full) drops the data and keeps the pipe
        drained, so the game never blocks on a full pipe and no reader thread dies with a traceback; the first such
        error is kept in ``write_error``."""
        try:
            self._append(data)
        except OSError as e:
            self.write_error = self.write_error or e

    def _append(self, data: bytes) -> None:
        """Append ``data``, cutting the middle of the file when it would pass the cap."""
        if self._fd < 0:
            return
        self.bytes_in += len(data)
        if self._size + len(data) <= self.max_bytes:
            os.pwrite(self._fd, data, self._size)
            self._size += len(data)
            return
        first_cut = self._tail_start is None
        if first_cut:  # keep the head up to its last whole line before half the cap, then say what was cut
            end = min(self.max_bytes // 2, self._size)
            window = max(0, end - 2**14)
            cut = os.pread(self._fd, end - window, window).rfind(b"\n") + 1
            start = window + cut if cut else end
            marker = (b"" if cut or not start else b"\n") + (
                f"# godot-ppo: this log is capped at {self.max_bytes / 2**20:g} MiB: output was cut here, "
                "only the newest output follows\n").encode()
        else:
            start = self._tail_start
        keep = self.max_bytes // 4
        tail = os.pread(self._fd, keep, max(start, self._size - keep)) + data
        if len(tail) > keep or self._size - start > keep:
            tail = tail[-keep:]
            newline = tail.find(b"\n")
            if 0 <= newline < len(tail) - 1:
                tail = tail[newline + 1:]  # start the tail at a whole line
        if first_cut:
            os.pwrite(self._fd, marker, start)
            self._tail_start = start = start + len(marker)
        os.pwrite(self._fd, tail, start)
        self._size = start + len(tail)
        os.ftruncate(self._fd, self._size)
        if first_cut:
            self.flooded = True
            if self.on_flood is not None:
                self.on_flood()

    def _close_file_if_done(self) -> None:
        if self._closed and not self._pipes and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ScriptErrorWatch:
    """Godot's script errors in one instance slot's output, counted once the instance has handshaken (``armed``).

    The log's reader thread feeds it what the game prints (`CappedLog.watch`), so watching costs the step loop
    nothing; a game that prints nothing costs nothing either. The first error, its ``SCRIPT ERROR:`` line with the
    ``At:`` / ``ERROR:`` lines that follow it, goes to ``on_first`` at once (one line); ``count`` keeps counting.
    """

    def __init__(self, on_first: Callable[[str], None]):
        self.armed = False
        self.count = 0
        self.first: Optional[str] = None
        self._on_first = on_first
        self._partial = b""  # the end of the last chunk, a line not yet complete
        self._held = False  # the first error was the chunk's last line: held for one more chunk

    def feed(self, data: bytes) -> None:
        if not self.armed:
            return
        if self.first is not None:  # only counting now: one native search per chunk
            self.count += data.count(SCRIPT_ERROR_MARK)
            return
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[-4096:]
        found = _first_script_error(lines)
        if found is None:
            return
        i, first = found
        if i == len(lines) - 1 and not self._held:
            # Godot writes the ``At:`` line that says where in a write of its own: wait for the next chunk (or the
            # pipe's end, `end`) once, so the report names the script
            self._held = True
            self._partial = b"\n".join(lines[i:] + [self._partial])
            return
        self._report(first, lines[i:])

    def end(self) -> None:
        """The game's output ended: report an error still held back for its ``At:`` line."""
        if self.first is None and self._held:
            lines = self._partial.split(b"\n")
            found = _first_script_error(lines)
            if found is not None:
                self._report(found[1], lines[found[0]:])

    def _report(self, first: str, lines: list) -> None:
        self.first = first
        self.count = sum(line.count(SCRIPT_ERROR_MARK) for line in lines)
        self._partial = b""
        try:
            self._on_first(self.first)
        except Exception:  # a report that cannot be said (stderr gone) must not stop the log's reader thread
            pass


def first_script_error(output: str) -> Optional[str]:
    """The first of Godot's script errors in a game's whole output (a run that ended), in one line with the ``At:``
    / ``ERROR:`` lines that say where, or None."""
    found = _first_script_error(output.encode(errors="replace").split(b"\n"))
    return None if found is None else found[1]


def _first_script_error(lines: list) -> Optional[tuple[int, str]]:
    """(its line's index, the error in one line) of the first ``SCRIPT ERROR:`` among ``lines`` (bytes), or None."""
    for i, line in enumerate(lines):
        at = line.find(SCRIPT_ERROR_MARK)
        if at < 0:
            continue
        said = [line[at:]]
        for more in lines[i + 1:i + 4]:  # the At: / ERROR: lines that go with it, up to the next script error
            if SCRIPT_ERROR_MARK in more or not more.strip().startswith(WHERE_MARKS_BYTES):
                break
            said.append(more.strip())
        return i, "; ".join(part.decode(errors="replace").strip() for part in said)[:600]
    return None
