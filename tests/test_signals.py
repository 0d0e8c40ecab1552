"""The signal policy (python_trainer/base/signals.py) in this process: SIGINT, SIGTERM and SIGHUP raise `Interrupted`
in the main thread where it can be cleaned up after. The commands' own stops (a checkpoint, no process left) are in
test_reliability_trainer.py and test_reliability_processes.py."""

import os
import queue
import random
import signal
import sys
import threading
import subprocess
import textwrap
import time

import pytest

from helpers import REPO, wait_for
from python_trainer.base import signals


def test_a_sigterm_that_ray_turns_into_a_plain_keyboard_interrupt_is_still_named_sigterm():
    """Ray's blocking calls (ray.get, ray.wait) run our handler from C and raise a plain KeyboardInterrupt in place
    of its Interrupted(SIGTERM): the signal that arrived is still the one named (issue 22)."""
    with signals.signal_policy():
        try:
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                wait_for(lambda: False, 10, "interruption by SIGTERM")  # the handler raises at the next bytecode
            except signals.Interrupted:
                raise KeyboardInterrupt from None  # what Ray's check_signals does with it
        except KeyboardInterrupt as e:
            assert type(e) is KeyboardInterrupt and signals.signum_of(e) == signal.SIGTERM


def test_a_signal_while_a_checkpoint_is_written_is_raised_once_it_is_whole():
    """torch.save's C++ writer turns an exception raised inside it into its own RuntimeError ("unexpected pos"), so a
    SIGTERM there ended a Ray run with exit 1 and a torch error: it is now raised after the write, as SIGTERM."""
    written = []
    with signals.signal_policy():
        with pytest.raises(signals.Interrupted) as raised:
            with signals.signals_deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside the write
                written.append("whole")
    assert written == ["whole"] and raised.value.signum == signal.SIGTERM


def test_a_later_signal_during_a_stuck_stop_prints_where_each_thread_waits(monkeypatch, capfd):
    """A stop that hangs (a clean-up waiting on something) is reported where it waits: a signal that comes long after
    the first prints every thread's stack; an impatient second Ctrl-C gets the one-line note alone."""
    with signals.signal_policy():
        with pytest.raises(signals.Interrupted):
            os.kill(os.getpid(), signal.SIGINT)
            wait_for(lambda: False, 10, "interruption by SIGINT")
        with signals.hold_signals():  # the clean-up on the way out
            os.kill(os.getpid(), signal.SIGTERM)  # soon after the first: the note only
            monkeypatch.setattr(signals._Policy, "received_at", signals._Policy.received_at - 60)
            os.kill(os.getpid(), signal.SIGTERM)  # a minute after it: the note and the stacks
    err = capfd.readouterr().err
    assert err.count("SIGTERM received: already stopping") == 2, err
    assert err.count("still stopping 60 s after the first signal; where each thread waits:") == 1, err
    assert "test_a_later_signal_during_a_stuck_stop_prints_where_each_thread_waits" in err, err


def _locking_loop(kind: str):
    """(one step of a loop that takes and gives back a lock of the standard library's, that lock)."""
    if kind == "condition":
        condition = threading.Condition(threading.Lock())

        def step():
            with condition:
                pass

        return step, condition._lock
    if kind == "queue":
        q = queue.Queue()
        return (lambda: (q.put(1), q.get())), q.mutex
    event = threading.Event()
    return (lambda: (event.set(), event.clear())), event._cond._lock


@pytest.mark.parametrize("kind", ["condition", "queue", "event"])
def test_a_signal_inside_the_standard_librarys_locking_code_leaves_no_lock_held(kind):
    """A signal raised where it lands could leave Condition.__enter__'s lock held (about one time in two in this
    loop; a queue's or an Event's one time in four), and a stop's clean-up then hung on it: a TensorBoard writer's
    close, on its queue. The signal is now raised once the locking code has returned."""
    rng = random.Random(0)
    for _ in range(30):
        step, lock = _locking_loop(kind)
        timer = threading.Timer(rng.uniform(0.001, 0.005), os.kill, (os.getpid(), signal.SIGINT))
        with signals.signal_policy():
            with pytest.raises(signals.Interrupted):
                timer.start()
                while True:
                    step()
        timer.join()
        assert not lock.locked(), f"the {kind}'s lock stayed held after the signal"
        assert sys.getprofile() is None  # the profile function that waited for the code's return is gone


@pytest.mark.parametrize("wait", ["queue", "event", "join"])
def test_a_signal_still_ends_a_wait_in_the_standard_library(wait):
    """The locking code's waits (Condition.wait, Thread.join) are where a signal must still land at once: a Ctrl-C
    ends a trainer waiting on its collector or on a thread."""
    never = threading.Event()
    blocked = threading.Thread(target=never.wait, args=(60,), daemon=True)
    blocked.start()
    waits = {"queue": lambda: queue.Queue().get(timeout=60), "event": lambda: never.wait(60),
             "join": lambda: blocked.join(60)}
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    with signals.signal_policy():
        with pytest.raises(signals.Interrupted):
            timer.start()
            waits[wait]()
    assert time.monotonic() - started < 30, "the signal waited for the wait to end"
    never.set()
    timer.join()


def test_a_signal_that_arrives_in_a_garbage_collector_callback_still_interrupts():
    """Python prints and drops an exception raised in a weakref callback (as in __del__ or an at-fork hook): a tune
    interrupted there finished its trial and exited 0. The policy raises such a signal again, after the callback.
    (In a child: pytest's own hooks would see the signal too.)"""
    child = textwrap.dedent("""
        import os, signal, sys, weakref
        from python_trainer.base import signals
        class Thing:
            pass
        def callback(_):
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs at the callback's next bytecode, inside it
            for _ in range(1000):
                pass
        with signals.signal_policy():
            try:
                thing = Thing()
                ref = weakref.ref(thing, callback)
                del thing  # the callback runs here
                for _ in range(100000):
                    pass
                print("went on")
            except signals.Interrupted as e:
                print("interrupted", e.signum)
        print("hook restored", sys.unraisablehook is not signals._unraisable)
    """)
    result = subprocess.run([sys.executable, "-c", child], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.stdout.split("\n")[:2] == ["interrupted 2", "hook restored True"], result.stdout + result.stderr
    assert "Traceback" not in result.stderr
