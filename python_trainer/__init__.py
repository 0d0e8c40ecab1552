"""Train Godot games with a CleanRL-style PPO.

Where each concern lives (scripts/import_graph.py prints every module with its job, and checks the layering):
    ppo            the PPO algorithm alone, one file, CleanRL style: its flags, GAE, the loss, one iteration at a time
    agent          the MLP agent (one actor head per action key) and its action for the env
    recurrent      --lstm: the recurrent agent (CleanRL's ppo_atari_lstm.py)
    rnd            --rnd: the curiosity bonus (CleanRL's ppo_rnd_envpool.py)
    normalization  observation normalisation and reward scaling
    rollout        the rollout buffer, collect_rollout over pipelined groups, the rollouts' interface (local)
    ray_rollouts   the same interface on Ray workers across machines
    policies       several policies in one game: one learner per policy name, their rollouts routed from one env
    self_play      --self-play: one team learns against a pool of its past policy's snapshots, with Elo
    train          the `godot-ppo train` command: flags, run folder, resume, checkpoints, signals, evaluation
    trained_agent  the agent a run's flags describe, new or loaded from a checkpoint (for the tools)
    checkpoint     the checkpoint file; run_folder: a run's folder, args.json, episodes.csv, TensorBoard, progress
    policy_file    the in-engine player's policy file (format, building it from an agent, writing, reading)
    onnx_policy    policy files as ONNX models in godot-rl's convention, and ONNX policies as policy files
    playback       policy export from checkpoints and watching trained agents in the engine
    profile/       headless vs windowed instance profiling (command, sample, measure, report, compare)
    game_commands  `godot-ppo envs` and `godot-ppo launch`
    vec_env        the gymnasium vector env over Godot instances (gym_env: over gymnasium ids; grouped_env: groups)
    launcher       ports, tokens, logs, Xvfb, restarts of game instances
    protocol       godot-rl's wire protocol: framing, messages, timeouts
    game           which game: --env-path / --env-id, Godot versus gymnasium, one instance's command line
    env_params     a game's environment parameters: what it declares, --env-param's values and their checks
    curriculum     --curriculum files (lessons, completion criteria) and the schedule train.py asks for the values
    export         exporting any Godot 3 project (headless and windowed binaries, presets when missing)
    processes, paths, errors, files, flags, signals, running_stats: small pieces below everything
"""

__version__ = "0.1.0"


def make_vec_env(env_id=None, **kwargs):
    """A gymnasium VectorEnv for a Godot game (``env_path=`` an export of any project with the rl_sync addon, and
    optionally ``env_id`` a game in it; ``ball_chase`` alone: this repository's export) or a gymnasium id
    (``CartPole-v1``)."""
    from python_trainer.envs.vec_env import make_vec_env as _make_vec_env

    return _make_vec_env(env_id, **kwargs)
