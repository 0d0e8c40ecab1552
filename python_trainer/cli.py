"""The `godot-ppo` command: one subcommand per job, each implemented in the module named for it.

One signal policy for every command (`signal_policy`, installed here around every command and by ppo.main):
SIGINT, SIGTERM and SIGHUP all end a command the way Ctrl-C does, by raising `Interrupted` (a KeyboardInterrupt)
in the main thread, so `timeout`, `docker stop`, a batch scheduler or a closed SSH session get what Ctrl-C gets
(`train`: a checkpoint at the last completed update and the --resume hint; every command: its Godot instances
closed). A signal that is ignored when the command starts (SIG_IGN: `cmd &` in a script ignores SIGINT, `nohup`
SIGHUP) stays ignored. Only the first signal interrupts; later ones are noted and do not cut the clean-up (the
checkpoint being written) short. Exit status: 130 for SIGINT, 128 + N for signal N (143 SIGTERM, 129 SIGHUP) where
a command's Ctrl-C status is 130 (train, profile); `launch` and `play`, whose normal stop is Ctrl-C, exit 0.
"""

import contextlib
import importlib
import os
import signal
import sys
import threading

# subcommand -> (module, function, one-line help); modules are imported only when used so
# `godot-ppo export` does not pay for importing torch.
COMMANDS = {
    "export": ("python_trainer.export", "main", "export the Godot project (headless and windowed binaries)"),
    "envs": ("python_trainer.vec_env", "envs_main", "list the games with their observation/action spaces"),
    "launch": ("python_trainer.vec_env", "launch_main", "start instances and step them with random actions"),
    "train": ("python_trainer.ppo", "main", "train with PPO (CleanRL's flags)"),
    "export-policy": ("python_trainer.playback", "export_policy_main", "write a trained actor for in-engine play"),
    "play": ("python_trainer.playback", "play_main", "watch a trained policy in the Godot window"),
    "profile": ("python_trainer.profiling", "main", "profile headless against windowed instances"),
}

# ======================================================================================================================
# The signal policy
# ======================================================================================================================
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived (``signum``); every `except KeyboardInterrupt` clean-up path handles it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Policy:
    depth = 0  # nested signal_policy() blocks (cli.main, then ppo.main): only the outermost installs
    previous: dict = {}
    received = None  # the first ending signal, once one arrived
    holding = 0  # hold_signals() blocks: signals are noted, not raised


def _handler(signum, frame):
    if _Policy.received is None:
        _Policy.received = signum
        if not _Policy.holding:
            raise Interrupted(signum)
    note = f"\ngodot-ppo: {signal.Signals(signum).name} received: already stopping (saving, closing the instances)\n"
    try:
        os.write(2, note.encode())
    except OSError:  # stderr closed (a hung-up terminal)
        pass


def signum_of(exc: BaseException) -> int:
    """The signal behind an interruption (SIGINT for a plain KeyboardInterrupt)."""
    return getattr(exc, "signum", signal.SIGINT)


@contextlib.contextmanager
def signal_policy():
    """Install the policy for the duration of a command (main thread only; restored after)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _Policy.depth += 1
    if _Policy.depth == 1:
        _Policy.received, _Policy.holding, _Policy.previous = None, 0, {}
        for sig in ENDING_SIGNALS:
            current = signal.getsignal(sig)
            if current == signal.SIG_IGN:
                continue  # ignored by whoever started us: stays ignored
            _Policy.previous[sig] = current
            signal.signal(sig, _handler)
    try:
        yield
    finally:
        _Policy.depth -= 1
        if _Policy.depth == 0:
            for sig, prev in _Policy.previous.items():
                signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
            _Policy.previous = {}


@contextlib.contextmanager
def hold_signals():
    """While a command saves its work on the way out: an ending signal is noted, not raised."""
    _Policy.holding += 1
    try:
        yield
    finally:
        _Policy.holding -= 1


def interrupted_status(code: int) -> int:
    """A command's exit status after the policy: 130 (its Ctrl-C status) becomes 128 + the signal that arrived."""
    if code == 130 and _Policy.received is not None:
        return 128 + int(_Policy.received)
    return code


# ======================================================================================================================
# The command
# ======================================================================================================================
def usage():
    lines = ["usage: godot-ppo COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<14} {help_}" for name, (_, _, help_) in COMMANDS.items()]
    lines += ["", "`godot-ppo COMMAND --help` shows a command's options."]
    return "\n".join(lines)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"godot-ppo: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module, func, _ = COMMANDS[name]
    with signal_policy():
        try:
            return interrupted_status(getattr(importlib.import_module(module), func)(rest) or 0)
        except KeyboardInterrupt as e:  # outside the command's own clean-up (e.g. while importing it)
            try:
                print(f"\ngodot-ppo {name}: interrupted", file=sys.stderr)
            except OSError:  # a hung-up terminal
                pass
            return 128 + signum_of(e)


if __name__ == "__main__":
    sys.exit(main())
