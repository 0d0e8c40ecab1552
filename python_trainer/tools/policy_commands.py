"""`godot-ppo export-policy` and `godot-ppo import-policy`: a trained actor, or another trainer's ONNX model, as a
policy file the game plays by itself (--policy=FILE), and a policy as an ONNX model.

    godot-ppo export-policy runs/ball_chase__ppo__1__1700000000           # -> <run>/policy.json
    godot-ppo export-policy runs/ball_chase__ppo__1__1700000000 --format onnx -o policy.onnx   # godot-rl's ONNX
    godot-ppo import-policy model.onnx --env-id ball_chase -o policy.json   # an SB3/CleanRL ONNX model, in the engine
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, Optional

import numpy as np
import tyro

from python_trainer.base.errors import UserError
from python_trainer.base.flags import ENV_ID_FLAG, ENV_PATH_FLAG, aliases, parse_flags
from python_trainer.engine.policy_file import policy_entries, read_policy, write_policy
from python_trainer.envs.game import godot_game
from python_trainer.tools.game_flags import GameArgs
from python_trainer.tools.policy_export import export_onnx, export_policy, game_env_info, resolve_checkpoint

Output = Annotated[Optional[str], aliases("-o"), tyro.conf.arg(metavar="FILE")]


@dataclass(kw_only=True)  # kw_only: the source, required, follows GameArgs' flags with defaults
class ExportPolicyArgs(GameArgs):
    """Write a trained actor as a policy file the game runs by itself (--policy=FILE)."""

    src: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR_OR_CHECKPOINT")]
    """a run folder (its model.pt, else checkpoint.pt) or a .pt file; a policy .json converts to ONNX"""
    out: Output = None
    """output file (default: RUN_DIR/policy.json, or <checkpoint stem>.policy.json)"""
    env_path: ENV_PATH_FLAG.type(": its game's action keys are read instead of the checkpoint's (default: the "
                                 "checkpoint's own record, else the export it was trained with)"
                                 ) = ENV_PATH_FLAG.default(None)
    env_id: ENV_ID_FLAG.type(" (else in this repository's), the one that will play the policy (default: the one the "
                             "checkpoint trained on). A policy trained on a gymnasium id plays in a game with the same "
                             "observations and actions, e.g. CartPole-v1's in cart_pole") = ENV_ID_FLAG.default(None)
    format: Optional[Literal["json", "onnx"]] = None
    """json: the policy file the engine plays (--policy=FILE); onnx: the same network as an ONNX model in godot-rl's
    convention, the normalisation folded in (docs/onnx.md). Default: onnx when --out ends in .onnx, else json"""


@dataclass(kw_only=True)
class ImportPolicyArgs(GameArgs):
    """Turn an ONNX MLP policy (godot-rl's export of SB3's or CleanRL's PPO, or godot-ppo's own) into a policy file the
    game plays by itself (--policy=FILE): no C#, no Python, no ONNX runtime."""

    model: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="MODEL.onnx")]
    """the ONNX model (godot-rl's convention: obs -> output)"""
    out: Output = None
    """output policy file (default: MODEL with .json)"""
    env_path: ENV_PATH_FLAG.type(": the one whose game the policy plays (default: this repository's)"
                                 ) = ENV_PATH_FLAG.default(None)
    env_id: ENV_ID_FLAG.type(", the one the policy plays: its action keys name the outputs, in godot-rl's order "
                             "(needed for SB3's and CleanRL's models; godot-ppo's own carry them)"
                             ) = ENV_ID_FLAG.default(None)
    policy_name: Optional[str] = None
    """the agents' policy_name this network plays, in a game of several policies (default: none, it plays every agent
    that no other --policy file names)"""


def _export_env_info(args: ExportPolicyArgs) -> Optional[dict]:
    """The env_info of the game --env-path / --env-id name, whose action keys the policy file gets (None: the
    checkpoint's own)."""
    if args.env_path is not None and not args.src.endswith(".json"):
        from python_trainer.checkpoint import load_checkpoint  # torch: only for a checkpoint

        trained = args.env_id or load_checkpoint(resolve_checkpoint(args.src))["env_id"]
        return game_env_info(godot_game(trained, args.env_path, timeout=args.connect_timeout), args.connect_timeout)
    if args.env_id is not None:
        return game_env_info(godot_game(args.env_id, timeout=args.connect_timeout), args.connect_timeout)
    return None


def _say_written(out: Path, policy: dict) -> None:
    """What a policy file holds: a line for each policy (a bundle holds several)."""
    for entry in policy_entries(policy):
        n_params = sum(len(layer["bias"]) * (1 + len(layer["weight"][0])) for layer in entry["layers"])
        lstm = entry.get("lstm")
        if lstm:  # a recurrent policy: the LSTM's weights too
            n_params += 4 * lstm["hidden_size"] * (lstm["input_size"] + lstm["hidden_size"] + 1)
        cnn, image = entry.get("cnn"), entry.get("image")
        if cnn:  # a camera policy: its encoder's convolutions and dense layer too
            n_params += sum(np.size(part["weight"]) + np.size(part["bias"]) for part in [*cnn["convs"], cnn["dense"]])
        sees = f" + {image['key']} {' x '.join(str(n) for n in image['size'])}" if image else ""
        actions = ", ".join(f"{k['key']} ({k['action_type']}, {k['size']})" for k in entry["action_keys"])
        named = f" policy {entry['policy_name']!r}:" if "policy_name" in entry else ""
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB): {entry['env']},{named} {entry['observation_size']} "
              f"observations{sees} -> {actions}, {n_params} parameters, global step {entry['source']['global_step']}")


def export_policy_main(argv=None) -> int:
    """`godot-ppo export-policy`: a run folder's or checkpoint's actor as a policy file (or an ONNX model)."""
    args = parse_flags(ExportPolicyArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo export-policy")
    fmt = args.format or ("onnx" if args.out and args.out.endswith(".onnx") else "json")
    try:
        env_info = _export_env_info(args)
        out = (export_onnx if fmt == "onnx" else export_policy)(args.src, args.out, env_info)
    except UserError:
        raise
    except ValueError as e:  # a checkpoint unread (a game that did not start is a Fault, said above: status 1)
        raise UserError(str(e)) from None
    if fmt == "onnx":
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB): ONNX opset 17 in godot-rl's convention, inputs obs and "
              "state_ins, outputs output and state_outs (docs/onnx.md)")
        return 0
    _say_written(out, read_policy(out))
    print(f"watch it: godot-ppo play {out}")
    return 0


def import_policy_main(argv=None) -> int:
    """`godot-ppo import-policy`: an ONNX MLP policy as a policy file."""
    args = parse_flags(ImportPolicyArgs, list(sys.argv[1:] if argv is None else argv), "godot-ppo import-policy")
    try:
        from python_trainer.engine.onnx_import import import_policy  # torch and onnx: only for this command

        env_info = None
        if args.env_id is not None or args.env_path is not None:
            game = godot_game(args.env_id, args.env_path, timeout=args.connect_timeout)
            env_info = game_env_info(game, args.connect_timeout)
        policy = import_policy(args.model, env_info, policy_name=args.policy_name)
        out = write_policy(Path(args.out) if args.out else Path(args.model).with_suffix(".json"), policy)
    except UserError:
        raise
    except ValueError as e:  # a model that is not a policy (a game that did not start is a Fault, said above)
        raise UserError(str(e)) from None
    actions = ", ".join(f"{k['key']} ({k['action_type']}, {k['size']})" for k in policy["action_keys"])
    print(f"wrote {out}: {policy['env']}, {policy['observation_size']} observations -> {actions}, "
          f"{len(policy['layers'])} layers{', observations normalised' if policy['obs_normalization'] else ''}")
    print(f"watch it: godot-ppo play {out}")
    return 0
