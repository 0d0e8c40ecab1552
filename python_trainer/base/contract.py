"""The contract between the game and the trainer, declared once: what both sides must agree on.

It holds the game binary's command-line flags (`--name=value`: each flag's name and who reads it), then the wire's
facts (godot-rl's port and handshake version, our encodings, a packed step reply's type words and statuses, the
connect timeout, env_info's keys), the image-key rule, the files' format tags, a policy file's activations and limits,
the fixed parts of the lines the trainer reads from a game's output (ours, Godot's and godot_rl_agents' plugin's), and
(from bounds.py's table) every bound the game checks too. Python modules import them from here; the addon gets
the contract as one generated GDScript file, godot_project/addons/rl_sync/contract.gd, which tests/test_contract.py
holds current:

    python -m python_trainer.base.contract --write      # after editing this file
    python -m python_trainer.base.contract --check      # exit 1 when contract.gd is stale
    python -m python_trainer.base.contract --write-docs # docs/protocol.md's table of the message kinds

The game ignores a `--key=value` it does not know, so a misspelt flag would do nothing without a word: at start the
addon (rl_args.gd) prints one line for a flag that is none of FLAGS and close to one of them (String.similarity at
least SIMILAR_FLAG, or one letter added, dropped, changed or swapped with its neighbour), and the run goes on. A game
lists its own flags in the project setting OWN_FLAGS_SETTING (a comma-separated String or an Array of names); they
are never warned about.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from python_trainer.base import bounds

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

# --- The wire: godot-rl's protocol (its port, its handshake version) and our extensions to it --------------------
EDITOR_PORT = 11008  # godot-rl's default port (GodotEnv.DEFAULT_PORT): the editor's game tries it
CONNECT_TIMEOUT_S = 30.0  # seconds a game tries to connect, and the trainer waits for a game's message
MAJOR_VERSION = "0"  # godot-rl's handshake version 0.7 (godot-rl 0.8's client); the game accepts any 0.x
MINOR_VERSION = "7"
EXTENSION_VERSION = 1  # our extensions (hello, terminal observations, TimeLimit.truncated, packed observations)
EXTENSION_KEY = "extension_version"  # env_info's key of EXTENSION_VERSION (our addon's env_info only)
ENV_INFO_KEYS = ["n_agents", "observation_space", "action_space"]  # godot-rl's: every env_info has them
POLICY_NAMES_KEY = "agent_policy_names"  # godot-rl's too (its Godot 4 plugin's): each agent's policy
# Our extensions of env_info (a game made with godot_rl_agents' plugin sends none): each agent's side (-1: none), arena
# and whether it has a scripted opponent; physics frames per decision and per second of game time; and the rest.
TEAMS_KEY = "agent_teams"
ARENAS_KEY = "agent_arenas"
SCRIPTED_KEY = "agent_scripted"
DECISION_FRAMES_KEY = "decision_frames"
PHYSICS_FPS_KEY = "physics_fps"
ENV_INFO_EXTENSIONS = ["env", "max_episode_steps", EXTENSION_KEY, "obs_encoding", "step_encoding", "env_params",
                       "agents_from_flag", "copies", TEAMS_KEY, ARENAS_KEY, SCRIPTED_KEY, DECISION_FRAMES_KEY,
                       PHYSICS_FPS_KEY]
JSON_ENCODING = "json"  # godot-rl's JSON lists, what a handshake that asks for nothing gets
PACKED_OBS_ENCODING = "f32_base64"  # "obs_encoding": observations as base64 little-endian float32 ("obs_f32")
BINARY_STEP_ENCODING = "binary"  # "step_encoding": packed actions in, one packed step reply out
OBS_ENCODINGS = [JSON_ENCODING, PACKED_OBS_ENCODING]
STEP_ENCODINGS = [JSON_ENCODING, BINARY_STEP_ENCODING]
# A packed body as Godot's var2bytes() writes a pool array: a little-endian uint32 type word (Godot's Variant type),
# a uint32 count, the values; its first byte is never the "{" of a JSON body.
POOL_BYTE_ARRAY = 20  # bytes, zero-padded to a multiple of 4 (a packed step reply's camera images)
POOL_INT_ARRAY = 21  # int32 values (discrete actions)
POOL_REAL_ARRAY = 22  # float32 values (continuous actions; a step reply's observations, rewards, statuses)
PACKED_HEADER_BYTES = 8  # the type word and the count
STATUS_RUNNING = 0  # an agent's status in a packed step reply
STATUS_TERMINATED = 1
STATUS_TRUNCATED = 2  # by the time limit
# --- The messages: each kind's "type" value, whose it is, and the fields each side's message of it carries -----------
TYPE_KEY = "type"  # every JSON message has it (a packed step message, in binary, has none)


@dataclass(frozen=True)
class Message:
    owner: str  # GODOT_RL: godot-rl's own (its GodotEnv and plugin speak it); RL_SYNC: our extension
    trainer: Optional[tuple] = None  # the fields of the trainer's message of this kind (None: it never sends one)
    game: Optional[tuple] = None  # the fields of the game's (None: it never sends one; () a bare one, as a reply)


_ENV_INFO_REPLY = (*ENV_INFO_KEYS, POLICY_NAMES_KEY, *ENV_INFO_EXTENSIONS, "actors")  # + the in-engine actors' version
# kind ("type") -> Message. godot-rl's own fields come first; those after them in godot-rl's kinds are ours.
MESSAGES = {
    "handshake": Message(GODOT_RL, trainer=("major_version", "minor_version", "obs_encoding", "step_encoding")),
    "env_info": Message(GODOT_RL, trainer=(), game=_ENV_INFO_REPLY),
    "reset": Message(GODOT_RL, trainer=(), game=("obs", "obs_f32")),
    "action": Message(GODOT_RL, trainer=("action",)),  # the binary step exchange's actions: packed, no "type"
    "step": Message(GODOT_RL, game=("obs", "reward", "done", "info", "obs_f32")),  # the action's reply
    "call": Message(GODOT_RL, trainer=("method", "args", "agent_args"), game=("returns",)),
    "close": Message(GODOT_RL, trainer=()),
    "hello": Message(RL_SYNC, game=("token", "env", "n_agents", "pid", "protocol")),  # first, with --token only
    "busy": Message(RL_SYNC, trainer=()),  # a trainer's answer to a hello when it trains another game
    "error": Message(RL_SYNC, game=("message",)),  # a bug of the game's own, instead of a reply; then it quits
    "stats": Message(RL_SYNC, trainer=(), game=("time_usec", "physics_frames", "idle_frames", "frames_drawn", "fps",
                                                "physics_ticks_per_second", "headless", "engine_version", "session")),
    "env_params": Message(RL_SYNC, trainer=("values", "agent_values"), game=()),
    "drivers": Message(RL_SYNC, trainer=("agents", "driver", "path", "seed"), game=("acted",)),
    "actors": Message(RL_SYNC, trainer=("path", "paths", "policies", "agent_policies", "num_steps", "seed", "logprob"),
                      game=("weights", "obs_size", "action_size", "n_agents", "sizes")),
    "fragment": Message(RL_SYNC, trainer=("version",), game=("version", "parts", "floats", "episodes")),
    "alive": Message(RL_SYNC, game=("step",)),  # while the game collects a fragment
}


def message(kind: str, **fields) -> dict:
    """{"type": kind, **fields}: KeyError unless MESSAGES declares the kind and each field for one side's message."""
    declared = MESSAGES[kind]
    allowed = set(declared.trainer or ()) | set(declared.game or ())
    for name in fields:
        if name not in allowed:
            raise KeyError(f"the contract's {kind!r} message has no field {name!r}")
    return {TYPE_KEY: kind, **fields}


def kind(name: str) -> str:
    """A message kind's "type" value, for a comparison or a literal: KeyError unless MESSAGES declares it."""
    MESSAGES[name]
    return name


def is_message(msg, kind: str) -> bool:
    """Whether ``msg`` (a decoded message) is of ``kind`` (KeyError unless MESSAGES declares it)."""
    MESSAGES[kind]
    return isinstance(msg, dict) and msg.get(TYPE_KEY) == kind


# --- Observations: images -------------------------------------------------------------------------------------------
IMAGE_KEY_MARK = "2d"  # godot-rl's rule (core/godot_env.py): an observation key containing it is a camera image
# --- Files the game writes or reads ---------------------------------------------------------------------------------
POLICY_FORMAT = "godot-ppo-policy"  # a policy file's "format"
# Its "version": 2, layers may end in relu or sigmoid too; 3, "policy_name" and bundles of several policies; 4, a
# camera's "image" and "cnn"; 5, each continuous key's "log_std" (--policy_sample). Every one of them is readable.
POLICY_VERSION = 5
POLICY_VERSIONS = [1, 2, 3, 4, 5]
POLICY_BUNDLE_VERSION = 3
POLICY_CAMERA_VERSION = 4
DEMO_FORMAT = "rl_sync_demo/1"  # a demonstration file's meta "format"
ACTIVATIONS = ["linear", "relu", "tanh", "sigmoid"]  # what a policy file's layer may end with
# A policy file's limits besides bounds.py's LAYER_SIZE and POLICY_WEIGHTS: the most layers (dense layers and a camera
# policy's convolutions together; ours have 3 to 6, and the engine loads 32 of width 64 in about two seconds), and the
# bytes a file may hold per weight it may hold (the trainer writes 12 to 15), checked before it is read.
MAX_POLICY_LAYERS = 32
POLICY_BYTES_PER_WEIGHT = 16

# --- Lines the trainer reads from a game's output --------------------------------------------------------------------
# Our addon's lines begin with ADDON_LINE; a line that ends the game (rl_args.gd's fail()) and one it goes on after
# with these prefixes, then the words.
ADDON_LINE = "rl_sync: "
ERROR_PREFIX = ADDON_LINE + "error: "
WARNING_PREFIX = ADDON_LINE + "warning: "
# rl_args.gd's line for an unknown flag close to one of FLAGS ({given}: the argument as typed).
WARNING = WARNING_PREFIX + "unknown flag {given}; did you mean --{known}?"
# The one-line JSON reports, each {KEY: {...}} on stdout: a benchmark's rate, an evaluation's (policy or match), the
# games a binary holds (--list_envs: {"envs": [...], "default": name, "env_params": {game: {name: spec}}}, the last
# only when a game declares some) and the run's clock at its end.
BENCHMARK_REPORT = "benchmark"
EVAL_REPORT = "eval"
ENVS_REPORT = "envs"
ENVS_DEFAULT_KEY = "default"
ENVS_PARAMS_KEY = "env_params"
RUN_REPORT = "run"
RELOAD_LINE = ADDON_LINE + "policy reloaded (global step "  # then "<step>, <fps> fps)" (policy_reloader.gd)
WINDOW_LINE = ADDON_LINE + "agents in the window: "  # then the count (window_helpers.gd)
PERSON_LINE = ADDON_LINE + "you play: "  # then the person's side and keys (match_mode.gd)
# Godot's (the engine's) own marks, which the addon's error watch (error_watch.gd) reads too: a line of an error in a
# script, of the engine's errors and warnings, and the line that follows each, "   At: file:line", which says where.
ENGINE_SCRIPT_ERROR = "SCRIPT ERROR:"
ENGINE_ERROR = "ERROR:"
ENGINE_WARNING = "WARNING:"
ENGINE_AT = "At:"
# Not ours, never printed by the addon (so not in contract.gd): godot_rl_agents' plugin's lines.
PLUGIN_CONNECT_LINE = "trying to connect to server"  # godot_rl_agents' Godot 3 sync.gd, before its one try
PLUGIN_PHYSICS_LINE = "physics ticks"  # ...and "<ticks/s> <time scale> <speedup> <node's speed_up>" it applied

# What contract.gd declares besides FLAGS: these names, in this order, then every bound the game checks.
SHARED = ["EDITOR_PORT", "CONNECT_TIMEOUT_S", "MAJOR_VERSION", "MINOR_VERSION", "EXTENSION_VERSION", "EXTENSION_KEY",
          "ENV_INFO_KEYS", "POLICY_NAMES_KEY", "TEAMS_KEY", "ARENAS_KEY", "SCRIPTED_KEY", "DECISION_FRAMES_KEY",
          "PHYSICS_FPS_KEY", "ENV_INFO_EXTENSIONS", "JSON_ENCODING", "PACKED_OBS_ENCODING", "BINARY_STEP_ENCODING",
          "OBS_ENCODINGS", "STEP_ENCODINGS", "POOL_BYTE_ARRAY", "POOL_INT_ARRAY", "POOL_REAL_ARRAY",
          "PACKED_HEADER_BYTES", "STATUS_RUNNING", "STATUS_TERMINATED", "STATUS_TRUNCATED", "IMAGE_KEY_MARK",
          "POLICY_FORMAT", "POLICY_VERSION", "POLICY_VERSIONS", "POLICY_BUNDLE_VERSION", "POLICY_CAMERA_VERSION",
          "DEMO_FORMAT", "ACTIVATIONS", "MAX_POLICY_LAYERS", "POLICY_BYTES_PER_WEIGHT", "ADDON_LINE", "ERROR_PREFIX",
          "WARNING_PREFIX", "BENCHMARK_REPORT", "EVAL_REPORT", "ENVS_REPORT", "ENVS_DEFAULT_KEY", "ENVS_PARAMS_KEY",
          "RUN_REPORT", "RELOAD_LINE", "WINDOW_LINE", "PERSON_LINE", "ENGINE_SCRIPT_ERROR", "ENGINE_ERROR",
          "ENGINE_WARNING", "ENGINE_AT"]


def is_image_key(key: str) -> bool:
    """godot-rl's test for an image observation (core/godot_env.py: ``"2d" in k``)."""
    return IMAGE_KEY_MARK in key


def bound_constants() -> dict:
    """{GDScript name: value} of every bound the game checks too (bounds.py's table names its constant here)."""
    return {bound.gdscript.split(":")[1]: bound.value for bound in bounds.ALL.values() if bound.gdscript}


def shared_constants() -> dict:
    """{name: value} of everything contract.gd declares but FLAGS, in its order."""
    return {**{name: globals()[name] for name in SHARED}, **bound_constants()}


CONTRACT_GD = Path(__file__).resolve().parents[2] / "godot_project" / "addons" / "rl_sync" / "contract.gd"
PROTOCOL_MD = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"  # its table of MESSAGES (--write-docs)
DOCS_BEGIN, DOCS_END = "<!-- messages:begin -->\n", "<!-- messages:end -->\n"


def flag(name: str) -> str:
    """``--name``, for a command line: KeyError unless the contract declares the flag."""
    FLAGS[name]
    return f"--{name}"


def arg(name: str, value) -> str:
    """``--name=value``, the way the binary takes a flag's value (KeyError unless the contract declares it)."""
    return f"{flag(name)}={value}"


def _gd_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _gd_value(value) -> str:
    if isinstance(value, str):
        return _gd_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_gd_value(v) for v in value) + "]"
    return repr(value)


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
              "",
              "# What else both sides share: the wire, images, files, and the bounds of sizes (python_trainer/base/",
              "# contract.py says what each one is; bounds.py the bounds)."]
    lines += [f"const {name} := {_gd_value(value)}" for name, value in shared_constants().items()]
    lines += ["", "# The message kinds: each one's \"type\" value (contract.py's MESSAGES says whose it is and its fields).",
              f"const TYPE_KEY := {_gd_string(TYPE_KEY)}"]
    lines += [f"const MSG_{kind.upper()} := {_gd_string(kind)}" for kind in MESSAGES]
    lines += [""]
    return "\n".join(lines)


def messages_table() -> str:
    """docs/protocol.md's table of every message kind, whose it is, and the fields of each side's message."""
    def said(fields):
        return "never" if fields is None else ", ".join(f"`{name}`" for name in fields) or "(no fields)"
    rows = [f"| `{kind}` | {m.owner} | {said(m.trainer)} | {said(m.game)} |" for kind, m in MESSAGES.items()]
    return "\n".join(["| `type` | whose | the trainer's message: fields | the game's: fields |",
                      "| --- | --- | --- | --- |", *rows, ""])


def protocol_page(page: str) -> str:
    """``page`` with its table of MESSAGES, between DOCS_BEGIN and DOCS_END, written anew."""
    head, rest = page.split(DOCS_BEGIN, 1)
    return head + DOCS_BEGIN + messages_table() + DOCS_END + rest.split(DOCS_END, 1)[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Write or check addons/rl_sync/contract.gd from this module.")
    parser.add_argument("--write", action="store_true", help="write contract.gd")
    parser.add_argument("--check", action="store_true", help="exit 1 when contract.gd is not what --write writes")
    parser.add_argument("--write-docs", action="store_true", help="write docs/protocol.md's table of the messages")
    args = parser.parse_args(argv)
    if args.write_docs:
        PROTOCOL_MD.write_text(protocol_page(PROTOCOL_MD.read_text()))
        return 0
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
