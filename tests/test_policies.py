"""Several policies in one game (python_trainer/variants/policies.py): agents named by policy train as one network per name.

tag (godot_project/games/tag) has two: a chaser (6 observations, a continuous move) and a runner (8 observations, a
discrete move). Its vector env pads observations to 8 and takes {policy name: actions}; the train command trains one
learner per policy, each with its own checkpoint entry, TensorBoard tags, episodes and policy file; godot-rl's own
PettingZoo wrapper steps the same export and sees the names; a game made with godot_rl_agents' plugin whose agents
carry two names trains two networks. How much each policy learns is scripts/bench_policies.py's.
"""

import json

import numpy as np
import pytest
import torch

from helpers import event_accumulator, free_port, plain_export, read_scalars
from python_trainer import cli
from python_trainer.run import train
from python_trainer.envs.game import GameBugError
from python_trainer.engine.in_engine import evaluate_in_engine
from python_trainer.envs.spaces import policies_from_env_info, policy_env_info
from python_trainer.envs.vec_env import make_vec_env

OBS = {"obs": {"size": [3], "space": "box"}}
MOVE = {"move": {"size": 2, "action_type": "continuous"}}
TURN = {"turn": {"size": 3, "action_type": "discrete"}}


def info(names, obs, act):
    return {"n_agents": len(names), "agent_policy_names": names, "observation_space": obs, "action_space": act}


def test_policies_come_from_the_names_and_each_keeps_its_own_spaces():
    game = info(["a", "b", "a"], [OBS, {"obs": {"size": [5], "space": "box"}}, OBS], [MOVE, TURN, MOVE])
    a, b = policies_from_env_info(game)
    assert (a.name, a.agents, a.observation_space.shape, b.name, b.agents, b.observation_space.shape) == (
        "a", (0, 2), (3,), "b", (1,), (5,))
    assert policy_env_info(game, "b")["action_space"] == [TURN] and policy_env_info(game, "b")["n_agents"] == 1
    (shared,) = policies_from_env_info({"n_agents": 2, "observation_space": OBS, "action_space": MOVE})
    assert shared.name == "shared_policy" and shared.agents == (0, 1)  # a game that names none: one policy


@pytest.mark.parametrize("names, obs, said", [
    (["a", "a"], [OBS, {"obs": {"size": [4], "space": "box"}}], "agents 0 and 1 both use the policy 'a' but declare "
                                                              "different spaces"),
    (["a", ""], [OBS, OBS], "agent 1's policy name is '': every agent needs a non-empty String policy_name"),
    (["a", 3], [OBS, OBS], "agent 1's policy name is 3"),
    (["a"], [OBS, OBS], "expected a list of 2 names"),
])
def test_bad_policy_names_are_the_games_bug_in_one_line(names, obs, said):
    with pytest.raises(GameBugError, match=said) as e:
        policies_from_env_info({"n_agents": 2, "agent_policy_names": names, "observation_space": obs,
                                "action_space": [MOVE, MOVE]})
    assert "\n" not in str(e.value)


def test_tag_steps_each_policy_with_its_own_spaces(headless_export):
    env = make_vec_env("tag", num_instances=2, agents_per_instance=4)
    try:
        assert [p.name for p in env.policies] == ["chaser", "runner"] and env.mixed
        assert env.env_policy.tolist() == [0, 1] * 4
        obs, _ = env.reset(seed=0)
        assert obs.shape == (8, 8) and (obs[env.env_policy == 0, 6:] == 0).all()  # the chaser's 6, padded
        assert np.abs(obs[env.env_policy == 1, 6:]).sum() > 0  # the runner's 8 (its wall distances)
        before = obs.copy()
        obs, reward, *_ = env.step({"chaser": np.ones((4, 2)), "runner": np.full(4, 4)})  # right, at full speed
        # each moved as told: the chaser's x and the runner's x (both over the field) grew
        assert (obs[env.env_policy == 0, 0] > before[env.env_policy == 0, 0]).all()
        assert (obs[env.env_policy == 1, 0] > before[env.env_policy == 1, 0]).all()
        assert np.allclose(reward[0::2], -reward[1::2])  # what one gains the other loses
        with pytest.raises(ValueError, match=r"actions must be a dict \{policy name: that policy's batched actions\} "
                                             r"with the keys \['chaser', 'runner'\]"):
            env.step(np.zeros((8, 2)))
        with pytest.raises(ValueError, match=r"shape \(4,\)"):
            env.step({"chaser": np.zeros((4, 2)), "runner": np.zeros((3,), np.int64)})
    finally:
        env.close()


@pytest.mark.slow
def test_tag_trains_two_networks_with_their_own_files_tags_and_checkpoint(headless_export, tmp_path, capsys):
    root = tmp_path / "runs"
    flags = ["--env-id", "tag", "--num-instances", "2", "--agents-per-instance", "8", "--num-steps", "32",
             "--checkpoint-every", "1", "--eval-episodes", "2", "--run-dir-root", str(root)]
    assert train.main([*flags, "--total-timesteps", "1024"]) == 0
    out = capsys.readouterr().out
    assert "eval: policy 'chaser', deterministic, 2 episodes" in out and "eval: policy 'runner'" in out
    (run_dir,) = root.iterdir()
    files = {name: json.loads((run_dir / "policies" / f"{name}.json").read_text()) for name in ("chaser", "runner")}
    bundle = json.loads((run_dir / "policy.json").read_text())
    assert [p["policy_name"] for p in bundle["policies"]] == ["chaser", "runner"] == [
        files[name]["policy_name"] for name in ("chaser", "runner")]
    report = evaluate_in_engine(str(run_dir / "policy.json"), episodes=4, agents=4, max_episode_steps=50)
    assert sorted(report["by_policy"]) == ["chaser", "runner"]  # the engine plays the trained run, each side its own
    assert files["chaser"]["observation_size"] == 6 and files["runner"]["observation_size"] == 8
    assert [k["action_type"] for k in files["chaser"]["action_keys"]] == ["continuous"]
    assert [k["action_type"] for k in files["runner"]["action_keys"]] == ["discrete"]
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert sorted(ckpt["policies"]) == ["chaser", "runner"] and ckpt["model"] is None
    assert ckpt["policies"]["runner"]["action_space"]["type"] == "Discrete"
    tags = read_scalars(run_dir)
    for name in ("chaser", "runner"):
        assert {f"{name}/losses/value_loss", f"{name}/charts/learning_rate", f"{name}/eval/episodic_return"} <= set(tags)
    assert "losses/value_loss" not in tags and "charts/SPS" in tags  # the run's speed stays the run's
    assert "policy" in (run_dir / "episodes.csv").read_text().splitlines()[0]

    assert train.main(["--resume", str(run_dir), "--total-timesteps", "2048"]) == 0  # each policy resumes its own
    assert "global_step=2048" in capsys.readouterr().out
    resumed = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert resumed["global_step"] == 2048
    assert not torch.equal(resumed["policies"]["chaser"]["model"]["critic.0.weight"],
                           ckpt["policies"]["chaser"]["model"]["critic.0.weight"])

    # a checkpoint of one policy on a game of two: refused in one line, before anything runs
    single = root / "single"
    single.mkdir()
    torch.save({**ckpt, "policies": None, "model": {}}, single / "checkpoint.pt")
    (single / "args.json").write_text((run_dir / "args.json").read_text())
    assert cli.main(["train", "--resume", str(single)]) == 2
    err = capsys.readouterr().err.strip()
    assert "the checkpoint holds one policy, and tag now has the policies ['chaser', 'runner']: start a new run" in err


def test_a_plugin_game_with_two_policy_names_trains_two_networks(tmp_path, capsys):
    export = plain_export(tmp_path, "--fake_policy_names=left,right", "--fake_fixed_agents=4", name="duel")
    root = tmp_path / "runs"
    assert train.main(["--env-path", str(export), "--num-steps", "16", "--total-timesteps", "128",
                       "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    (run_dir,) = root.iterdir()
    ckpt = torch.load(run_dir / "model.pt", weights_only=True)
    assert sorted(ckpt["policies"]) == ["left", "right"]
    assert "mean_return_left" in capsys.readouterr().out
    # each policy's behaviour under its name (behaviour.py), as its other tags
    assert {"left/charts/truncated_share", "right/charts/truncated_share"} <= set(read_scalars(run_dir))
    assert {"left/actions/move", "right/actions/move/1"} <= set(event_accumulator(run_dir).Tags()["histograms"])


def test_policy_names_that_make_one_file_name_train_and_write_their_policy_files(tmp_path, capsys):
    export = plain_export(tmp_path, "--fake_policy_names=é,è", "--fake_fixed_agents=4", name="accents")
    root = tmp_path / "runs"
    assert train.main(["--env-path", str(export), "--num-steps", "16", "--total-timesteps", "128",
                       "--checkpoint-every", "1", "--eval-episodes", "0", "--run-dir-root", str(root)]) == 0
    assert "warning" not in capsys.readouterr().err
    (run_dir,) = root.iterdir()
    bundle = json.loads((run_dir / "policy.json").read_text(encoding="utf-8"))
    assert [p["policy_name"] for p in bundle["policies"]] == ["é", "è"]  # what play and --watch play
    assert sorted(json.loads(f.read_text(encoding="utf-8"))["policy_name"] for f in (run_dir / "policies").iterdir()) \
        == ["è", "é"]


def test_godot_rls_pettingzoo_wrapper_steps_tag_and_sees_the_names(headless_export):
    from godot_rl.wrappers.petting_zoo_wrapper import GDRLPettingZooEnv

    env = GDRLPettingZooEnv(port=free_port(), show_window=False, seed=0, config={
        "env_path": str(headless_export), "action_repeat": 1, "speedup": 1, "env": "tag", "agents": 4})
    try:
        assert env.agent_policy_names == ["chaser", "runner"] * 2
        assert env.observation_space(0)["obs"].shape == (6,) and env.observation_space(1)["obs"].shape == (8,)
        obs, _ = env.reset()
        assert len(obs[0]["obs"]) == 6 and len(obs[1]["obs"]) == 8
        for _ in range(3):
            obs, rewards, terminations, truncations, infos = env.step(
                {agent: env.action_space(agent).sample() for agent in env.agents})
        assert sorted(rewards) == [0, 1, 2, 3] and abs(rewards[0] + rewards[1]) < 1e-6
    finally:
        env.close()


def test_one_route_over_every_env_fills_the_buffer_as_collect_rollout_does_bit_for_bit():
    """The rollout loop exists once (rollout.serve_groups): collect_routes with one Route covering every env and
    collect_rollout give the same buffer, to the bit, over a truncating CartPole (time limits, episodes, V(final))."""
    from python_trainer.agent import Agent
    from python_trainer.envs.gym_env import GymVecEnv
    from python_trainer.normalization import Normalizer
    from python_trainer.rollout import RolloutBuffer, collect_rollout
    from python_trainer.variants.policies import Route, collect_routes
    import gymnasium as gym

    bufs = []
    for routed in (False, True):
        torch.manual_seed(0)
        agent = Agent(4, gym.spaces.Discrete(2))
        envs = GymVecEnv("CartPole-v1", num_envs=3, seed=0, max_episode_steps=5)
        normalizer, buf = Normalizer(4, 3, 0.99, norm_obs=True, norm_reward=True), RolloutBuffer(12, 3, 4, agent)
        buf.next_obs[:] = normalizer.normalize_obs(envs.reset(seed=0)[0])
        if routed:
            collect_routes(envs, [Route(agent, normalizer, buf)])
        else:
            collect_rollout(envs, agent, normalizer, buf)
        envs.close()
        bufs.append(buf)
    plain, routed = bufs
    assert plain.truncated.any() and plain.episodes and plain.group_steps == routed.group_steps == 12
    for name in plain.fields:
        assert np.array_equal(getattr(plain, name), getattr(routed, name)), name
    assert len(plain.episodes) == len(routed.episodes)
