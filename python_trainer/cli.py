"""The `godot-ppo` command: one subcommand per job, each implemented in the module named for it; the one place that
prints a command's error (`UserError`) and turns its kind into the exit status (base/errors.py's EXIT_STATUS).

Every command runs under one signal policy (signals.py): SIGINT, SIGTERM and SIGHUP end it the way Ctrl-C does.
"""

import importlib
import signal
import sys

from python_trainer.base.errors import UserError, exit_status, say
from python_trainer.base.signals import interrupted_status, signal_policy, signum_of

# subcommand -> (module, function, one-line help); modules are imported only when used so
# `godot-ppo export` does not pay for importing torch.
COMMANDS = {
    "export": ("python_trainer.tools.export", "main", "export the Godot project (headless and windowed binaries)"),
    "envs": ("python_trainer.tools.game_commands", "envs_main", "list the games with their observation/action spaces"),
    "launch": ("python_trainer.tools.game_commands", "launch_main", "start instances and step them with random actions"),
    "train": ("python_trainer.run.train", "main", "train with PPO (CleanRL's flags)"),
    "export-policy": ("python_trainer.tools.policy_commands", "export_policy_main", "write a trained actor for in-engine play"),
    "import-policy": ("python_trainer.tools.policy_commands", "import_policy_main", "turn an ONNX policy (SB3, CleanRL) into one"),
    "play": ("python_trainer.tools.play", "play_main", "watch a trained policy in the Godot window"),
    "record": ("python_trainer.tools.record_command", "main", "play the game and record demonstrations for --demos"),
    "profile": ("python_trainer.tools.profile.command", "main", "profile headless against windowed instances"),
    "package": ("python_trainer.tools.package", "main", "a trained run as a folder for the Hugging Face Hub (--push)"),
    "tune": ("python_trainer.tools.tune", "main", "search hyperparameters on a game (Optuna), best as train --config"),
}

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
        except UserError as e:  # the one place a command's error is printed: one line, named for the command
            say(error_line(name, e))
            return exit_status(e)  # its kind's status (errors.EXIT_STATUS): 2 what the user gave, 1 a fault
        except SystemExit as e:  # the parser's --help (0), or a flag it could not parse (it printed why)
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except KeyboardInterrupt as e:  # outside the command's own clean-up (e.g. while importing it)
            try:
                print(f"\ngodot-ppo {name}: interrupted by {signal.Signals(signum_of(e)).name}", file=sys.stderr)
            except OSError:  # a hung-up terminal
                pass
            return 128 + signum_of(e)


def error_line(command: str, message) -> str:
    """A command's error as it is printed (also by ray_cluster.py's guardian, which speaks for a learner Ray ended)."""
    return f"godot-ppo {command}: error: {message}"


if __name__ == "__main__":
    sys.exit(main())
