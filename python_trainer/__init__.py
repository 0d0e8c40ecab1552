"""Train Godot games with a CleanRL-style PPO.

Where each concern lives:
    paths       where this repository's Godot project and exports are
    game        which game: --env-path / --env-id, Godot versus gymnasium, one instance's command line
    export      exporting any Godot 3 project (headless and windowed binaries, presets when missing)
    processes   child processes: start in their own session, run with a timeout, end a process tree
    protocol    godot-rl's wire protocol: framing, messages, timeouts
    launcher    ports, tokens, logs, Xvfb, restarts of game instances
    vec_env     gymnasium vector envs over Godot instances (and over gymnasium ids)
    ppo         the PPO algorithm, one file, CleanRL style (Args, agent, train loop, load_agent)
    checkpoint  the checkpoint file: atomic writing, reading, spaces and RNG state in it
    run_folder  a run's folder: name, --resume, args.json, episodes.csv, TensorBoard/progress, curve, evaluation
    policy_file the in-engine player's policy file (format, building it from an actor, writing, reading)
    playback    policy export from checkpoints and watching trained agents in the engine
    profiling   headless vs windowed instance profiling
"""

__version__ = "0.1.0"


def make_vec_env(env_id=None, **kwargs):
    """A gymnasium VectorEnv for a Godot game (``env_path=`` an export of any project with the rl_sync addon, and
    optionally ``env_id`` a game in it; ``ball_chase`` alone: this repository's export) or a gymnasium id
    (``CartPole-v1``)."""
    from python_trainer.vec_env import make_vec_env as _make_vec_env

    return _make_vec_env(env_id, **kwargs)
