"""jumper, the 3D example game with a hybrid action space (a continuous "move" key and a discrete "jump" key):
its spaces and episodes in the real headless export, and hybrid actions end to end (PPO training, checkpoint,
policy file, in-engine play, the game's refusal of a policy with other action keys)."""

import json
import subprocess

import gymnasium as gym
import numpy as np

from helpers import REPO, run_dirs
from python_trainer import make_vec_env
from python_trainer.engine import in_engine
from python_trainer.run import train
from python_trainer.variants import trained_agent

JUMPER_ACTIONS = gym.spaces.Dict({"jump": gym.spaces.Discrete(2), "move": gym.spaces.Box(-1, 1, (2,), np.float32)})


def test_spaces_and_random_episodes(headless_export):
    env = make_vec_env("jumper", num_instances=1, agents_per_instance=8, seed=3)
    try:
        assert env.single_action_space == JUMPER_ACTIONS
        assert env.single_observation_space.shape == (26,)
        obs, _ = env.reset(seed=3)
        ended, infos_seen = 0, []
        for _ in range(400):
            obs, reward, terminated, truncated, infos = env.step(env.action_space.sample())
            assert np.abs(obs).max() <= 1.0 and np.isfinite(reward).all()
            if "_final_info" in infos:
                ended += int(terminated.sum())
                infos_seen += [infos["final_info"][i] for i in np.flatnonzero(infos["_final_info"])]
        # random play falls off (the episode terminates, with -1); the game reports its goals as episode info
        assert ended >= 4
        assert all(set(info) == {"goals", "reached_goal"} for info in infos_seen)
    finally:
        env.close()


def test_hybrid_training_end_to_end(headless_export, tmp_path):
    argv = ["--env-id", "jumper", "--agents-per-instance", "4", "--num-steps", "32", "--total-timesteps", "256",
            "--eval-episodes", "0", "--checkpoint-every", "1", "--run-dir-root", str(tmp_path / "runs")]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path / "runs")
    loaded = trained_agent.load_agent(run_dir)
    assert loaded.action_space == JUMPER_ACTIONS and loaded.global_step == 256
    assert loaded.agent.heads == [("move", "continuous", 2), ("jump", "discrete", 2)]
    actions = loaded.act(np.zeros((3, 26), np.float32))
    assert actions["move"].shape == (3, 2) and actions["jump"].shape == (3,) and actions["jump"].dtype == np.int64

    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy["action_rule"] == "per_key" and len(policy["action_keys"][0].pop("log_std")) == 2  # version 5
    assert policy["action_keys"] == [{"key": "move", "action_type": "continuous", "size": 2},
                                     {"key": "jump", "action_type": "discrete", "size": 2}]
    report = in_engine.evaluate_in_engine(run_dir / "policy.json", episodes=2, agents=2, max_episode_steps=60)
    assert report["env"] == "jumper" and report["episodes"] == 2 and max(report["lengths"]) <= 60

    # The same network with a 3-choice "jump": a policy for another game's keys is refused when the game loads it.
    policy["action_keys"][1]["size"] = 3
    last = policy["layers"][-1]
    last["weight"].append(last["weight"][-1])
    last["bias"].append(0.0)
    other = tmp_path / "other_keys.json"
    other.write_text(json.dumps(policy))
    result = subprocess.run([str(headless_export), "--fixed-fps", "60", "--env=jumper", f"--policy={other}",
                             "--eval_episodes=1"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert (f"rl_sync: error: policy file {other}: its action keys [jump (discrete, 3), move (continuous, 2)] do not "
            "match the game's [jump (discrete, 2), move (continuous, 2)]") in result.stderr


def test_committed_policy_reaches_goals_in_the_engine(headless_export):
    """exports/policies/jumper.json still fits the game (observation layout, action keys) and plays it: reaching a
    goal pays +2 and falling costs -1, so a mean return above 2 means goals reached (random play: about -1)."""
    report = in_engine.evaluate_in_engine(REPO / "exports" / "policies" / "jumper.json", episodes=16, agents=16,
                                         max_episode_steps=300)
    assert report["episodes"] == 16 and report["mean_return"] > 3.0, report
