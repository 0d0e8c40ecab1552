"""Train Godot games with a CleanRL-style PPO.

Where each concern lives:
    paths      where the Godot project and the exported binaries are
    export     exporting the Godot project (headless and windowed binaries)
    protocol   godot-rl's wire protocol: framing, messages, timeouts
    launcher   ports, processes, tokens, logs, Xvfb, restarts
    vec_env    gymnasium vector envs over Godot instances (and over gymnasium ids)
    ppo        the PPO algorithm, one file, CleanRL style
    playback   policy export and watching trained agents in the engine
    profiling  headless vs windowed instance profiling
"""

__version__ = "0.1.0"


def make_vec_env(env_id, **kwargs):
    """A gymnasium VectorEnv for a Godot game name (``ball_chase``) or a gymnasium id (``CartPole-v1``)."""
    from python_trainer.vec_env import make_vec_env as _make_vec_env

    return _make_vec_env(env_id, **kwargs)
