"""A trained checkpoint as a policy file the game plays by itself, or as an ONNX model: found in a run folder, built
from the checkpoint's agent and the game's action keys, written, and re-exported when the checkpoint is newer.

    export_policy("runs/ball_chase__ppo__1__1700000000")               # -> <run>/policy.json
    export_onnx("runs/ball_chase__ppo__1__1700000000", "policy.onnx")  # godot-rl's convention (onnx_policy.py)
    ensure_policy("runs/ball_chase__ppo__1__1700000000")               # the run's policy file, fresh

What the file holds, and how it is built from an agent in memory: engine/policy_file.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from python_trainer.base.errors import one_line
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S
from python_trainer.base.paths import CHECKPOINT_NAME, MODEL_NAME, checkpoint_in
from python_trainer.engine.in_engine import PlaybackError, policy_files
from python_trainer.engine.policy_file import (
    POLICIES_DIR, POLICY_NAME, PolicyFileError, game_policy, is_bundle, policy_bundle, policy_file_names, policy_source, read_policy,
    write_policy,
)
from python_trainer.envs.game import GodotGame, godot_game, is_gym_id
from python_trainer.envs.launcher import InstanceLauncher, LaunchOptions


def resolve_checkpoint(src) -> Path:
    """The checkpoint of a run folder (base.paths.checkpoint_in), or the checkpoint file itself."""
    src = Path(src)
    if not src.exists():
        raise PlaybackError(f"{src}: no such file or folder (give a run folder, a model.pt/checkpoint.pt or a policy .json)")
    checkpoint = checkpoint_in(src)
    if not checkpoint.is_file():
        raise PlaybackError(
            f"{src} holds no {MODEL_NAME} or {CHECKPOINT_NAME}: give a run folder of `godot-ppo train` (runs/<env>__...) "
            "that got at least to its first checkpoint, or a .pt file"
        )
    return checkpoint


def default_policy_path(src) -> Path:
    """<run>/policy.json for a run folder; <stem>.policy.json next to a checkpoint file."""
    src = Path(src)
    if src.is_dir():
        return src / POLICY_NAME
    return src.with_name(src.stem + ".policy.json")


def game_env_info(game: GodotGame, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S) -> dict:
    """The game's env_info, read from one headless instance with one agent (about half a second)."""
    with InstanceLauncher(game, LaunchOptions(agents_per_instance=1, connect_timeout=connect_timeout)) as launcher:
        return launcher.instances[0].env_info


def checkpoint_policy(checkpoint_path, env_info: Optional[dict] = None) -> dict:
    """The policy file's content for a checkpoint (model.pt / checkpoint.pt); a checkpoint of several policies (its
    "policies": {name: that policy's model, normaliser and spaces}) gives a bundle of them, each named.

    ``env_info`` is the game's env_info (where the action keys come from); without it, the one saved in the
    checkpoint, else (older checkpoints) one headless instance of the checkpoint's game is started to ask for it.
    """
    from python_trainer.checkpoint import load_checkpoint  # torch: only when a checkpoint is exported
    from python_trainer.run.run_folder import recorded_command, train_command
    from python_trainer.variants.trained_agent import agent_from_checkpoint

    checkpoint_path = Path(checkpoint_path)
    where = str(checkpoint_path)
    try:
        ckpt = load_checkpoint(checkpoint_path)
        named = ckpt.get("policies")
        # each policy's entry holds what a checkpoint of one policy holds at its top level: rebuilt as one, each
        # policy is read like a checkpoint of one
        common = {key: value for key, value in ckpt.items() if key != "policies"}
        agents = ({name: agent_from_checkpoint({**common, **state}) for name, state in named.items()} if named
                  else {None: agent_from_checkpoint(ckpt)})
    except Exception as e:  # truncated, not a checkpoint, another format
        raise PlaybackError(f"{where}: cannot read it as a godot-ppo checkpoint ({type(e).__name__}: "
                            f"{one_line(e)[:200]})") from None
    loaded = next(iter(agents.values()))
    env_info = env_info or ckpt.get("env_info")
    if env_info is None:
        if is_gym_id(loaded.env_id) and loaded.env_path is None:
            raise PlaybackError(
                f"{where}: it was trained on the gymnasium id {loaded.env_id!r}, not a Godot game; "
                "only Godot games can play a policy in the engine: give --env GAME, a game with the same observations "
                "and actions (e.g. --env cart_pole for CartPole-v1)"
            )
        env_info = game_env_info(godot_game(loaded.env_id, loaded.env_path))
    args = ckpt.get("args") or {}
    # the command that trained it: as its run folder recorded it, else every flag it was trained with
    command = recorded_command(checkpoint_path.parent) or train_command(args)
    source = policy_source(checkpoint_path, global_step=loaded.global_step, update=ckpt.get("update", 0),
                           trained_env=loaded.env_id, seed=args.get("seed"), command=command,
                           env_path=args.get("env_path"))
    policies = [game_policy(one.agent, one.normalizer, one.action_space, env_info, env_id=one.env_id, source=source,
                            where=where if name is None else f"{where} (policy {name!r})", policy_name=name)
                for name, one in agents.items()]
    return policies[0] if not named else policy_bundle(policies, env=policies[0]["env"], source=source)


def export_policy(src, out=None, env_info: Optional[dict] = None) -> Path:
    """Write the actor of a run folder / checkpoint file as a policy file; returns its path.

    Default output: ``<run>/policy.json`` for a run folder, ``<stem>.policy.json`` next to a checkpoint file.
    """
    checkpoint = resolve_checkpoint(src)
    out = Path(out) if out is not None else default_policy_path(src)
    return write_policy(out, checkpoint_policy(checkpoint, env_info))


def export_onnx(src, out=None, env_info: Optional[dict] = None) -> Path:
    """Write a run folder's / checkpoint's actor, or a policy file, as an ONNX model in godot-rl's convention
    (onnx_policy.py); returns its path. Default output: ``<run>/policy.onnx``, else beside ``src``."""
    from python_trainer.engine.onnx_policy import write_onnx  # torch and onnx: only for this format

    src = Path(src)
    if src.suffix == ".json":
        policy = read_policy(src)
        default = src.with_suffix(".onnx")
    else:
        policy = checkpoint_policy(resolve_checkpoint(src), env_info)
        default = default_policy_path(src).with_suffix(".onnx")
    if is_bundle(policy):  # an ONNX model is one network in godot-rl's convention: one policy at a time
        names = [entry["policy_name"] for entry in policy["policies"]]
        folder = (src if src.is_dir() else src.parent) / POLICIES_DIR
        raise PolicyFileError(f"{src} holds {len(names)} policies ({', '.join(names)}) and an ONNX model holds one: "
                              f"export each policy's own file, e.g. godot-ppo export-policy "
                              f"{folder / policy_file_names(names)[names[0]]} --format onnx")
    return write_onnx(Path(out) if out is not None else default, policy)


def ensure_policy(src):
    """A policy file for ``src``: the file itself (.json; several separated by commas: each), or the run's/checkpoint's
    policy file, (re-)exported when it is missing or older than the checkpoint."""
    if len(policy_files(src)) > 1:
        return ",".join(str(ensure_policy(part)) for part in policy_files(src))
    src = Path(src)
    if src.suffix == ".json":
        if not src.is_file():
            raise PlaybackError(f"policy file {src}: the file does not exist")
        return src
    checkpoint = resolve_checkpoint(src)
    policy = default_policy_path(src)
    if policy.is_file() and policy.stat().st_mtime >= checkpoint.stat().st_mtime:
        return policy
    print(f"exporting {checkpoint} -> {policy}", flush=True)
    return export_policy(src, policy)
