"""Train Godot games with a CleanRL-style PPO.

The student's files sit here at the package's root: `ppo.py` (the algorithm alone, one file), `agent.py`, `rollout.py`
and the little they need. One folder per layer sits around them, each importing only the layers below it
(`LAYERS`, bottom first, is the one map: `scripts/layers.py` prints the tree and checks every import against it, and
docs/layout.md is held to it by tests/test_layers.py):
"""

__version__ = "0.1.0"

# The layer map, bottom first: (folder, what it holds). A module imports only from its own folder or those before it.
LAYERS = (
    ("base", "the small pieces below everything: errors, files, flags, paths, processes, signals, running statistics"),
    ("envs", "the games as environments: the wire protocol, which game, its instances and their display, the vector envs"),
    (".", "the algorithm: ppo, the agent, the rollout, normalisation, the optimizer step, checkpoints, demo files"),
    ("variants", "what fills ppo.py's slots: LSTM, curiosity, cloning, several policies, self-play, Ray rollouts"),
    ("engine", "policies the engine plays by itself: the policy file, ONNX both ways, evaluation, matches, recording, --watch"),
    ("run", "the train command around ppo.py: its phases, the run folder, the curriculum, what the agents do"),
    ("tools", "the commands around training: export, envs/launch, export-policy, import-policy, play, record, profile, tune"),
)
__doc__ += "\n".join(f"    {folder + '/' if folder != '.' else '(root)':<10} {what}" for folder, what in LAYERS) + "\n"


def make_vec_env(env_id=None, **kwargs):
    """A gymnasium VectorEnv for a Godot game (``env_path=`` an export of any project with the rl_sync addon, and
    optionally ``env_id`` a game in it; ``ball_chase`` alone: this repository's export) or a gymnasium id
    (``CartPole-v1``)."""
    from python_trainer.envs.vec_env import make_vec_env as _make_vec_env

    return _make_vec_env(env_id, **kwargs)
