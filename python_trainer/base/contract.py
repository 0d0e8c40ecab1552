"""The contract between the game and the trainer, declared once: what both sides must agree on.

It starts with the game binary's command-line flags (`--name=value`): each flag's name and who reads it. The addon gets
the contract as one generated GDScript file, godot_project/addons/rl_sync/contract.gd, which tests/test_contract.py
holds current:

    python -m python_trainer.base.contract --write      # after editing this file
    python -m python_trainer.base.contract --check      # exit 1 when contract.gd is stale

The game ignores a `--key=value` it does not know, so a misspelt flag would do nothing without a word: at start the
addon (rl_args.gd) prints one line for a flag that is none of FLAGS and close to one of them (String.similarity at
least SIMILAR_FLAG, or one letter added, dropped, changed or swapped with its neighbour), and the run goes on. A game
lists its own flags in the project setting OWN_FLAGS_SETTING (a comma-separated String or an Array of names); they
are never warned about.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GODOT_RL = "godot-rl"  # godot-rl's clients pass it (its GodotEnv, and the plugin's games read it too)
RL_SYNC = "rl_sync"  # the addon reads it (our trainer passes it, or a person running the game)
TESTS = "tests"  # the project's own GDScript tests and benchmark probes read it

# name -> who reads it. Names as the binary takes them: `--name=value`, a bare `--name` reading as true.
FLAGS = {
    # godot-rl's own: what its GodotEnv passes (`--headless` is Godot 4's engine flag, which Godot 3 hands to the game)
    "port": GODOT_RL,
    "env_seed": GODOT_RL,
    "speedup": GODOT_RL,
    "action_repeat": GODOT_RL,
    "headless": GODOT_RL,
    # the addon's: the game and its agents
    "env": RL_SYNC,
    "list_envs": RL_SYNC,
    "agents": RL_SYNC,
    "copies": RL_SYNC,
    "max_episode_steps": RL_SYNC,
    "connect_timeout": RL_SYNC,
    "token": RL_SYNC,
    "env_param": RL_SYNC,
    "max_fps": RL_SYNC,
    "no_vsync": RL_SYNC,
    "quit_after_frames": RL_SYNC,
    "quit_after_seconds": RL_SYNC,
    # the addon's: the runs the engine plays by itself
    "policy": RL_SYNC,
    "opponent": RL_SYNC,
    "policy_reload": RL_SYNC,
    "policy_sample": RL_SYNC,
    "policy_noop_max": RL_SYNC,
    "policy_forward": RL_SYNC,
    "eval_episodes": RL_SYNC,
    "benchmark_steps": RL_SYNC,
    "record_dir": RL_SYNC,
    "record_every": RL_SYNC,
    "record_episodes": RL_SYNC,
    "record_agent": RL_SYNC,
    "record_demos": RL_SYNC,
    "rl_sync_watched": RL_SYNC,
    # the project's tests and benchmark probes (godot_project/tests/)
    "fragment_part_floats": TESTS,  # (smaller fragment parts, for the tests of parts)
    "cnn_bench_agents": TESTS,
    "cnn_bench_decisions": TESTS,
    "cnn_case": TESTS,
    "cnn_policy": TESTS,
    "lstm_bench_frames": TESTS,
    "lstm_case": TESTS,
    "probe_out": TESTS,
    "probe_replay": TESTS,
    "weights_bench": TESTS,
    "weights_case": TESTS,
}
SIMILAR_FLAG = 0.75  # String.similarity from which an unknown flag is taken for a misspelling of ours
OWN_FLAGS_SETTING = "rl_sync/own_flags"  # a game's own flags, never warned about
WARNING = "rl_sync: warning: unknown flag {given}; did you mean --{known}?"  # {given}: the argument as typed

CONTRACT_GD = Path(__file__).resolve().parents[2] / "godot_project" / "addons" / "rl_sync" / "contract.gd"


def flag(name: str) -> str:
    """``--name``, for a command line: KeyError unless the contract declares the flag."""
    FLAGS[name]
    return f"--{name}"


def arg(name: str, value) -> str:
    """``--name=value``, the way the binary takes a flag's value (KeyError unless the contract declares it)."""
    return f"{flag(name)}={value}"


def _gd_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gdscript() -> str:
    """The text of addons/rl_sync/contract.gd."""
    lines = ["extends Reference",
             "# GENERATED from python_trainer/base/contract.py (`python -m python_trainer.base.contract --write`): do not",
             "# edit. The one declaration of what the game and the trainer share; tests/test_contract.py fails when this",
             "# file is stale.",
             "",
             "# The binary's flags (--name=value) and who reads them.",
             "const FLAGS := {"]
    lines += [f"\t{_gd_string(name)}: {_gd_string(reader)}," for name, reader in FLAGS.items()]
    lines += ["}",
              "# String.similarity from which an unknown flag is taken for a misspelling of one of FLAGS.",
              f"const SIMILAR_FLAG := {SIMILAR_FLAG}",
              "# The project setting where a game lists its own flags, never warned about.",
              f"const OWN_FLAGS_SETTING := {_gd_string(OWN_FLAGS_SETTING)}",
              "# The line said at start for such a flag ({given}: the argument as typed).",
              f"const WARNING := {_gd_string(WARNING)}",
              ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write or check addons/rl_sync/contract.gd from this module.")
    parser.add_argument("--write", action="store_true", help="write contract.gd")
    parser.add_argument("--check", action="store_true", help="exit 1 when contract.gd is not what --write writes")
    args = parser.parse_args(argv)
    text = gdscript()
    if args.write:
        CONTRACT_GD.write_text(text)
        return 0
    current = CONTRACT_GD.read_text() if CONTRACT_GD.is_file() else ""
    if current != text:
        print(f"{CONTRACT_GD} is stale: run python -m python_trainer.base.contract --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
