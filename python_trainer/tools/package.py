"""`godot-ppo package`: a trained run as a folder ready for the Hugging Face Hub, as the course's `package_to_hub`
makes one: the evaluation, the model card, the model, a replay video, the hyperparameters; `--push` uploads it.

    godot-ppo package runs/ball_chase__ppo__1__1700000000 --repo-id USER/ppo-ball_chase --out hub/ball_chase
    godot-ppo package runs/ball_chase__ppo__1__1700000000 --repo-id USER/ppo-ball_chase --out hub/ball_chase --push

DIR/README.md (the model card: the evaluation's mean and std as a model-index), results.json, model.pt, args.json
(every flag of the training), logs/ (TensorBoard's events and episodes.csv), replay.mp4; a Godot game's also
policy.json (the policy file the game plays by itself) and policy.onnx. A Godot game is evaluated inside the engine
(in-engine evaluation, the run's --env-param constants), a gymnasium task in Python. The model card's side and the
upload are hub.py's.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from python_trainer.base.errors import UserError
from python_trainer.base.files import OutputError, check_output, scratch_dir, write_atomic, write_error
from python_trainer.base.flags import SEED_FLAG, at_least, flag, parse_flags, positive
from python_trainer.base.inputs import read_text
from python_trainer.base.paths import MODEL_NAME
from python_trainer.engine.in_engine import PlaybackError, evaluate_in_engine, policy_game, trained_env_params
from python_trainer.engine.policy_file import POLICIES_DIR, POLICY_NAME, policy_entries, read_policy
from python_trainer.engine.recording import record
from python_trainer.envs.env_params import binary_flags
from python_trainer.envs.game import is_gym_id
from python_trainer.envs.xvfb import open_display, temp_xvfb
from python_trainer.run.learners import VIDEO_DIR
from python_trainer.run.run_folder import ARGS_JSON, EPISODES_CSV
from python_trainer.tools import hub
from python_trainer.tools.game_flags import GameArgs
from python_trainer.tools.policy_export import ensure_policy, export_onnx, resolve_checkpoint

PROG = "godot-ppo package"
REPLAY_NAME = "replay.mp4"
RESULTS_NAME = "results.json"
SCRATCH_PREFIX = ".godot-ppo-package-"  # the folder is built beside --out under this name, then renamed into place
MAX_REPLAY_STEPS = 10_000  # a gymnasium task's replay: one episode, at most this many steps


@dataclass(kw_only=True)  # kw_only: the run, required, follows GameArgs' flags with defaults
class PackageArgs(GameArgs):
    """Make a trained run a folder ready for the Hugging Face Hub (the course's package_to_hub); --push uploads it."""

    src: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="RUN_DIR")]
    """a run folder of `godot-ppo train` (its model.pt, else its checkpoint.pt)"""
    repo_id: Annotated[str, tyro.conf.arg(metavar="USER/NAME")]
    """the Hub repository of the model (the model card names it; --push uploads to it)"""
    out: Annotated[str, tyro.conf.arg(metavar="DIR")]
    """the folder to write: new, empty, or a folder this command wrote before (then replaced whole)"""
    eval_episodes: int = flag(10, at_least(1, "an integer >= 1", "10"))
    """episodes of the deterministic policy in the evaluation (the course's 10)"""
    seed: SEED_FLAG.type(" of the evaluation and the replay") = SEED_FLAG.default(0)
    video_seconds: float = flag(10.0, positive("10", "a number of seconds > 0"))
    """a Godot game's replay, when the run has no --capture-video video: this many seconds of game time"""
    push: bool = False
    """upload the folder to the Hub (HfApi.create_repo + upload_folder; the token: HF_TOKEN or huggingface-cli login)"""


def main(argv=None) -> int:
    args = parse_flags(PackageArgs, list(sys.argv[1:] if argv is None else argv), PROG)
    hub.check_repo_id(args.repo_id)
    run_dir, out = Path(args.src), Path(args.out)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: {'not a folder' if run_dir.exists() else 'no such folder'}: give a run folder of "
                        "`godot-ppo train` (runs/<env>__<exp>__<seed>__<time>)")
    checkpoint = resolve_checkpoint(run_dir)  # a run folder with a model: said before any work
    trained = json.loads(read_text(run_dir / ARGS_JSON, f"{run_dir / ARGS_JSON}"))
    _check_out(out, run_dir)
    try:
        with scratch_dir(SCRATCH_PREFIX, root=out.parent) as tmp:
            folder = tmp / out.name
            folder.mkdir()
            files = _fill(folder, run_dir, checkpoint, trained, args)
            _replace(folder, out)
    except UserError:  # a game that cannot be used (2), did not start or crashed (1): its kind's status
        raise
    except ValueError as e:  # a policy the game cannot play
        raise UserError(str(e)) from None
    except OSError as e:
        raise write_error(getattr(e, "filename", None) or out, e) from None
    results = json.loads((out / RESULTS_NAME).read_text())
    print(f"wrote {out}: {', '.join(files)}; mean reward {results['mean_reward']:.2f} +/- "
          f"{results['std_reward']:.2f} over {results['n_evaluation_episodes']} episodes", flush=True)
    if args.push:
        print(f"pushing {out} to the Hub: {args.repo_id}", flush=True)
        print(f"pushed: {hub.push(out, args.repo_id)}")
    return 0


def _check_out(out: Path, run_dir: Path) -> None:
    """--out: new, empty, or an earlier package (replaced whole), outside the run folder; writable, with room."""
    if out.resolve() == run_dir.resolve() or run_dir.resolve() in out.resolve().parents:
        raise OutputError(f"--out {out}: it is inside the run folder {run_dir}: give a folder outside it")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out}: it is a file: give a folder")
    if out.is_dir() and any(out.iterdir()) and not hub.is_package(out):
        raise OutputError(f"--out {out}: that folder holds other files: give a new or empty folder (a folder this "
                          "command wrote is replaced whole)")
    check_output(out.parent, folder=True)


def _fill(folder: Path, run_dir: Path, checkpoint: Path, trained: dict, args: PackageArgs) -> dict:
    """Every file of the package in ``folder``; returns {file name: what it is} (the card's table)."""
    env_id = args.env_id or trained.get("env_id")
    godot = not (is_gym_id(env_id) and trained.get("env_path") is None)
    files = {}
    shutil.copy2(checkpoint, folder / MODEL_NAME)
    files[MODEL_NAME] = f"the PyTorch checkpoint ({checkpoint.name} of the run): `godot-ppo play` / `export-policy`"
    if godot:
        files.update(_policy_files(folder, run_dir))
    shutil.copy2(run_dir / ARGS_JSON, folder / ARGS_JSON)
    files[ARGS_JSON] = "every flag of the training (the hyperparameters) and the command that ran it"
    if _copy_logs(run_dir, folder / "logs"):
        files["logs/"] = "the training's TensorBoard events and episodes.csv"
    params = trained_env_params(run_dir)
    if godot:
        evaluation = _evaluate_in_engine(folder / POLICY_NAME, args, env_id, params)
    else:
        evaluation = _evaluate_in_python(checkpoint, args, env_id)
    write_atomic(folder / RESULTS_NAME, json.dumps(evaluation, indent=2))
    files[RESULTS_NAME] = "the evaluation (the course's results.json)"
    files[REPLAY_NAME] = _replay(folder / REPLAY_NAME, run_dir, folder, args, env_id, godot, params, checkpoint)
    hub.write_model_card(folder, env_id=env_id, repo_id=args.repo_id, evaluation=evaluation,
                         hyperparameters={k: v for k, v in trained.items() if k != "command"}, files=files)
    return {hub.CARD_NAME: "the model card", **files}


def _policy_files(folder: Path, run_dir: Path) -> dict:
    """policy.json (re-exported when older than the checkpoint), a game of several policies' policies/, and the
    ONNX model of each policy."""
    files = {}
    shutil.copy2(ensure_policy(run_dir), folder / POLICY_NAME)
    files[POLICY_NAME] = "the policy file: the game plays it by itself (`--policy=policy.json`, `godot-ppo play`)"
    entries = policy_entries(read_policy(folder / POLICY_NAME))
    if len(entries) == 1:
        export_onnx(folder / POLICY_NAME, folder / "policy.onnx")
        files["policy.onnx"] = "the policy as an ONNX model in godot-rl's convention (docs/onnx.md)"
        return files
    shutil.copytree(run_dir / POLICIES_DIR, folder / POLICIES_DIR)  # each policy's own file, and its ONNX model
    for policy in sorted((folder / POLICIES_DIR).glob("*.json")):
        export_onnx(policy, policy.with_suffix(".onnx"))
    files[f"{POLICIES_DIR}/"] = "each policy's own policy file and ONNX model"
    return files


def _copy_logs(run_dir: Path, logs: Path) -> bool:
    """The course's logs: the run's TensorBoard event files and episodes.csv (W&B's files and the videos stay)."""
    found = sorted(run_dir.glob("events.out.tfevents.*")) + sorted(run_dir.glob(EPISODES_CSV))
    if found:
        logs.mkdir()
        for path in found:
            shutil.copy2(path, logs / path.name)
    return bool(found)


def _results(returns, args: PackageArgs, env_id: str, where: str) -> dict:
    if not returns:
        raise PlaybackError(f"the evaluation of {env_id} ended no episode: raise --eval-episodes' time or check the game")
    return {"env_id": env_id, "mean_reward": float(np.mean(returns)), "std_reward": float(np.std(returns)),
            "n_evaluation_episodes": len(returns), "eval_datetime": datetime.datetime.now().isoformat(),
            "where": where, "seed": args.seed, "returns": [float(r) for r in returns]}


def _evaluate_in_engine(policy: Path, args: PackageArgs, env_id: str, params: dict) -> dict:
    """The policy file inside the game (`evaluate_in_engine`): a camera's game in the windowed export under a display
    (its window not drawn), another in the headless one."""
    camera = any("image" in entry for entry in policy_entries(read_policy(policy)))
    print(f"evaluating {policy.name} in the engine: {args.eval_episodes} episodes of {env_id}", flush=True)
    with temp_xvfb() as xvfb:
        display = open_display(xvfb, print, "for the cameras") if camera else None
        report = evaluate_in_engine(policy, env_id=env_id, env_path=args.env_path, episodes=args.eval_episodes,
                                    seed=args.seed, env_params=params, display=display)
    return _results(report["returns"], args, env_id, "inside the engine, no Python in the loop")


def _evaluate_in_python(checkpoint: Path, args: PackageArgs, env_id: str) -> dict:
    """A gymnasium task's deterministic policy over --eval-episodes episodes (rollout.evaluate, as `train` does)."""
    from python_trainer.envs.gym_env import make_gym_vec_env
    from python_trainer.rollout import evaluate
    from python_trainer.variants.trained_agent import load_agent

    print(f"evaluating {checkpoint.name} in Python: {args.eval_episodes} episodes of {env_id}", flush=True)
    loaded = load_agent(checkpoint)
    envs = make_gym_vec_env(env_id, num_envs=1, seed=args.seed)
    try:
        returns = evaluate(loaded.act, envs, args.eval_episodes, seed=args.seed)
    finally:
        envs.close()
    return _results(returns, args, env_id, "in Python, gymnasium")


def _replay(out: Path, run_dir: Path, folder: Path, args: PackageArgs, env_id: str, godot: bool, params: dict,
            checkpoint: Path) -> str:
    """replay.mp4: the run's --capture-video video (a Godot game's final.mp4, a gymnasium task's latest episode),
    else one recorded now. Returns what it is, for the card."""
    videos = sorted((run_dir / VIDEO_DIR).glob("*.mp4"), key=lambda p: (p.name != "final.mp4", -p.stat().st_mtime))
    if videos:
        shutil.copy2(videos[0], out)
        return f"the run's --capture-video video ({VIDEO_DIR}/{videos[0].name})"
    if godot:
        game = policy_game(folder / POLICY_NAME, env_id, args.env_path, timeout=args.connect_timeout)
        record(folder / POLICY_NAME, out, game, seed=args.seed, seconds=args.video_seconds,
               say=lambda line: print(line.split(" -> ")[0], flush=True),  # not the scratch folder's path
               connect_timeout=args.connect_timeout, extra_args=binary_flags(params))
        return f"{args.video_seconds:g} s of the policy playing in the game's window, recorded by `godot-ppo package`"
    _record_gym_episode(out, checkpoint, env_id, args.seed)
    return "one episode of the deterministic policy, recorded by `godot-ppo package`"


def _record_gym_episode(out: Path, checkpoint: Path, env_id: str, seed: int) -> None:
    """One episode of a gymnasium task's deterministic policy, rendered (rgb_array) into an MP4 by gymnasium's
    RecordVideo (moviepy, with imageio-ffmpeg's binary)."""
    import gymnasium as gym

    from python_trainer.envs.gym_env import make_gym_env
    from python_trainer.variants.trained_agent import load_agent

    loaded = load_agent(checkpoint)
    video_dir = out.parent / ".replay"
    env = gym.wrappers.RecordVideo(make_gym_env(env_id, "the replay video", render_mode="rgb_array"),
                                   str(video_dir), episode_trigger=lambda _: True, name_prefix="replay",
                                   disable_logger=True)
    try:
        obs, _ = env.reset(seed=seed)
        for _ in range(MAX_REPLAY_STEPS):
            obs, _, terminated, truncated, _ = env.step(loaded.act(obs[None])[0])
            if terminated or truncated:
                break
    finally:
        env.close()
    (clip,) = video_dir.glob("*.mp4")
    os.replace(clip, out)
    shutil.rmtree(video_dir)


def _replace(folder: Path, out: Path) -> None:
    """``folder`` (built beside ``out``) renamed into place; an earlier package there is replaced whole."""
    if out.is_dir() and any(out.iterdir()):
        old = folder.parent / ".previous"
        os.replace(out, old)
    os.replace(folder, out)
