"""What issue 58 says must work with in-engine actors (`godot-ppo train --in-engine`), each against the real export:
continuous and hybrid actions on an MLP, reward scaling, --demos, --env-param and --copies (curriculum, resume, --async
and the discrete games are proved in tests/test_engine_actors.py, --watch in tests/test_watch.py). Each test asserts
on what the in-engine path produced: the start-up line, args.json's in_engine, the actions the games sampled, the
rewards the learner scaled, the episodes the games played."""

import json
import subprocess
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import REPO, event_accumulator, read_scalars, run_dirs
from python_trainer.envs.spaces import spaces_from_env_info
from python_trainer.normalization import Normalizer
from python_trainer.rollout import RolloutBuffer
from python_trainer.run import train
from python_trainer.run.learners import engine_rollouts
from python_trainer.variants.trained_agent import make_agent

IN_ENGINE = "actors: in the engine (--in-engine)"


def short_run(root, *flags, steps=512):
    """train.main --in-engine on one instance of 2 agents, fragments of 128 steps, no final evaluation."""
    return train.main(["--in-engine", "--num-instances", "1", "--agents-per-instance", "2", "--num-steps", "128",
                       "--total-timesteps", str(steps), "--eval-episodes", "0", "--run-dir-root", str(root), *flags])


def spread(histogram) -> float:
    """The standard deviation of the values a TensorBoard histogram event holds."""
    h = histogram.histogram_value
    return float(np.sqrt(max(h.sum_squares / h.num - (h.sum / h.num) ** 2, 0.0)))


# ---------------------------------------------------------------------------------------------- action spaces
@pytest.mark.parametrize("env_id", ["ball_chase", "jumper"])  # continuous (move: 2), hybrid (move: 2, jump: 2)
def test_a_continuous_and_a_hybrid_game_train_in_the_engine_with_actions_sampled_from_the_policy(
        tmp_path, capsys, headless_export, env_id):
    """Two updates in the engine: the start-up line and args.json say so, the continuous values the games sampled
    spread as a policy of standard deviation 1 does (a game playing the mean would hold them near 0), a discrete key
    takes both its choices, and the reward scaler (on by default for continuous actions) counted every agent-step."""
    assert short_run(tmp_path, "--env-id", env_id) == 0
    assert IN_ENGINE in capsys.readouterr().out
    (run_dir,) = run_dirs(tmp_path)
    assert json.loads((run_dir / "args.json").read_text())["in_engine"] is True
    acc = event_accumulator(run_dir)
    for tag in ("actions/move/0", "actions/move/1"):
        assert [h.step for h in acc.Histograms(tag)] == [256, 512]
        assert all(spread(h) > 0.5 for h in acc.Histograms(tag)), [spread(h) for h in acc.Histograms(tag)]
    if env_id == "jumper":
        jumps = [h.histogram_value for h in acc.Histograms("actions/jump")]
        assert all(0.2 < h.sum / h.num < 0.8 for h in jumps), [h.sum / h.num for h in jumps]
    normalizer = torch.load(run_dir / "model.pt", weights_only=False)["normalizer"]
    assert normalizer["norm_reward"] and round(float(normalizer["return_rms"]["count"])) == 512
    assert float(normalizer["return_rms"]["var"]) > 0


# ---------------------------------------------------------------------------------------------- reward scaling
class RecordingNormalizer(Normalizer):
    """A Normalizer that keeps what each scale_reward call was given and gave back."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.scaled = []

    def scale_reward(self, rewards, dones, envs=slice(None)):
        out = super().scale_reward(rewards, dones, envs)
        self.scaled.append((np.array(rewards, np.float64), np.array(dones, bool), np.array(out)))
        return out


def test_reward_scaling_in_the_engine_scales_the_games_own_rewards_step_by_step(tmp_path, headless_export):
    """ball_chase's fragments of 128 steps with episodes cut at 40: the scaler is given each step's rewards as the game
    counted them (an episode's rewards sum to the return the game reports for it) and its episode ends, and the buffer
    holds what it gave back, which is not the raw reward."""
    from python_trainer.envs.vec_env import make_vec_env

    envs = make_vec_env("ball_chase", num_instances=1, agents_per_instance=2, run_dir=str(tmp_path), seed=3,
                        max_episode_steps=40)
    args = SimpleNamespace(env_id="ball_chase", num_steps=128, seed=5, step_timeout=30.0, async_rl=False)
    rollouts = engine_rollouts(envs, args, tmp_path, "test")
    try:
        obs_dim, n = envs.single_observation_space.shape[0], envs.num_envs
        torch.manual_seed(0)
        agent = make_agent(obs_dim, envs.single_action_space, {})
        normalizer = RecordingNormalizer(obs_dim, n, 0.99, True, True)
        buf = RolloutBuffer(128, n, obs_dim, agent)
        rollouts.reset(normalizer, buf, seed=3)
        rollouts.collect(agent, normalizer, buf)
        assert len(normalizer.scaled) == 128
        raw, dones, out = (np.stack(column) for column in zip(*normalizer.scaled))
        np.testing.assert_array_equal(buf.rewards, out.astype(np.float32))
        np.testing.assert_array_equal(dones, buf.terminated | buf.truncated)
        assert np.abs(raw).sum() > 0 and not np.allclose(out, raw)
        checked = 0
        for t, infos in buf.episodes:
            for a in np.flatnonzero(infos["_episode"]):
                length = int(infos["episode"]["l"][a])
                if t + 1 >= length:  # began inside this fragment
                    assert raw[t + 1 - length:t + 1, a].sum() == pytest.approx(infos["episode"]["r"][a], abs=1e-4)
                    checked += 1
        assert checked >= 4  # 128 steps of episodes of at most 40: at least 3 ended for each agent
    finally:
        rollouts.close()


# ---------------------------------------------------------------------------------------------- --demos
def test_demonstrations_train_the_clone_the_games_then_play_in_the_engine(tmp_path, capsys, headless_export):
    """cart_pole's pretrained policy records 2 episodes of 200 steps in the engine; a run with --demos clones them
    before its first fragment, so the games' first episodes, sampled in the engine from the clone, last far longer
    than a new policy's (about 22 steps: 9-13 of them end in the first fragment's 256 agent-steps), and PPO's
    update carries the cloning loss."""
    demos = tmp_path / "demos.json"
    pretrained = REPO / "exports" / "policies" / "cart_pole.json"
    record = subprocess.run([str(headless_export), "--env=cart_pole", f"--policy={pretrained}", "--record_episodes=2",
                             f"--record_demos={demos}", "--max_episode_steps=200", "--fixed-fps", "60"],
                            capture_output=True, text=True, timeout=60)
    assert record.returncode == 0, record.stderr[-2000:]
    assert short_run(tmp_path / "runs", "--env-id", "cart_pole", "--demos", str(demos), steps=256) == 0
    out = capsys.readouterr().out
    assert IN_ENGINE in out and "demonstrations: 2 demonstration episodes, 400 steps" in out
    (run_dir,) = run_dirs(tmp_path / "runs")
    lengths = [int(row.split(",")[2]) for row in (run_dir / "episodes.csv").read_text().splitlines()[1:]]
    assert len(lengths) <= 4 and all(length > 30 for length in lengths), lengths  # a new policy: 9-13 (seeds 1-3)
    scalars = read_scalars(run_dir)
    assert 256 in [step for step, _ in scalars["losses/bc_loss"]]  # the cloning loss in the update
    assert scalars["charts/bc_coef"][-1][1] > 0


# ---------------------------------------------------------------------------------------------- --env-param
@pytest.mark.slow
def test_env_params_reach_the_games_episodes_in_the_engine(tmp_path, capsys, headless_export):
    """jumper's platforms rise (rise_min, rise_max drawn per episode between 0.8 and 1) or fall (between -1 and
    -0.8) from each to the next: the goal the agents observe (observation 17, to_goal.y) is above them or below,
    over the episodes the games began by themselves in the engine as well as the first."""
    seen = {}
    for name, low, high in (("up", "uniform(0.8,0.9)", "uniform(0.9,1.0)"),
                            ("down", "uniform(-1.0,-0.9)", "uniform(-0.9,-0.8)")):
        assert short_run(tmp_path / name, "--env-id", "jumper", "--env-param", f"rise_min={low}",
                         "--env-param", f"rise_max={high}", steps=1024) == 0
        assert IN_ENGINE in capsys.readouterr().out
        (run_dir,) = run_dirs(tmp_path / name)
        rows = (run_dir / "episodes.csv").read_text().splitlines()
        assert rows[0].endswith(",lesson,rise_max,rise_min") and len(rows) > 3  # episodes ended in the engine
        seen[name] = float(torch.load(run_dir / "model.pt", weights_only=False)["normalizer"]["obs_rms"]["mean"][17])
    assert seen["up"] > 0.03 and seen["down"] < -0.06, seen  # the default course: about -0.02


# ---------------------------------------------------------------------------------------------- --copies
def test_each_copys_agent_acts_in_the_engine_and_its_steps_are_those_a_trainer_would_see(tmp_path, headless_export):
    """One instance of 3 copies of ball_chase's scene in actor mode: the fragment holds 3 agents, each in a world of
    its own, each ending episodes; a second such game driven step by step with the fragment's actions (clipped)
    gives the same observations, rewards and statuses."""
    from test_binary_exchange import RawGame

    from python_trainer.engine.policy_file import game_policy, write_policy
    from python_trainer.envs import fragment_wire as wire
    from python_trainer.envs.protocol import pack_actions, unpack_step

    flags = ("--agents=1", "--copies=3", "--max_episode_steps=15", "--env_seed=4")
    games = [RawGame(headless_export, *flags) for _ in range(2)]
    try:
        actor, stepped = games
        info = actor.start(step_encoding="binary", obs_encoding="f32_base64")
        stepped.start(step_encoding="binary", obs_encoding="f32_base64")
        assert info["n_agents"] == 3
        obs_space, act_space, *_ = spaces_from_env_info(info)
        torch.manual_seed(0)
        agent = make_agent(12, act_space, {})
        policy = game_policy(agent, Normalizer(12, 1, 0.99, False, False), act_space, info, env_id="ball_chase",
                             source={}, where="test")
        actor.send(wire.actors_message(write_policy(tmp_path / "p.json", policy), 40, 1))
        assert json.loads(actor.recv_body())["n_agents"] == 3
        actor.send(wire.fragment_message(1))
        while (header := json.loads(actor.recv_body()))["type"] == wire.ALIVE:
            pass
        parts = [actor.recv_body() for _ in range(header["parts"])]
        f = wire.parse_fragment(header, parts, "copies", num_steps=40, n_agents=3, obs_size=12, action_size=2)
        assert len({f.obs[5, k].tobytes() for k in range(3)}) == 3  # three worlds
        assert sorted({e["agent"] for e in f.episodes}) == [0, 1, 2]
        obs = f.obs[0]
        for t in range(40):
            np.testing.assert_array_equal(f.obs[t], obs, err_msg=f"step {t}")
            stepped.send_bytes(pack_actions(floats=np.clip(f.actions[t], -1, 1))[4:])
            obs, rewards, statuses, _, _ = unpack_step(stepped.recv_body(), 3, 12)
            np.testing.assert_array_equal(rewards, f.rewards[t], err_msg=f"step {t}")
            np.testing.assert_array_equal(statuses, f.statuses[t], err_msg=f"step {t}")
        np.testing.assert_array_equal(f.tail_obs, obs)
    finally:
        for game in games:
            game.close()


# ---------------------------------------------------------------------------------------------- --resume
@pytest.mark.slow
def test_a_run_trained_in_the_engine_resumes_step_by_step_and_then_in_the_engine_again(tmp_path, capsys,
                                                                                      headless_export):
    """jumper: one update in the engine, one step by step (--resume --no-in-engine), one in the engine again; each
    start-up line and args.json say the path, and the checkpoint counts every update's steps."""
    assert short_run(tmp_path, "--env-id", "jumper", steps=256) == 0
    assert IN_ENGINE in capsys.readouterr().out
    (run_dir,) = run_dirs(tmp_path)
    for total, flag, said in ((512, "--no-in-engine", "actors: the trainer steps every agent (--no-in-engine)"),
                              (768, "--in-engine", IN_ENGINE)):
        assert train.main(["--resume", str(run_dir), "--total-timesteps", str(total), flag]) == 0
        assert said in capsys.readouterr().out
        assert json.loads((run_dir / "args.json").read_text())["in_engine"] is (flag == "--in-engine")
        assert torch.load(run_dir / "model.pt", weights_only=False)["global_step"] == total
