"""`godot-ppo train --lstm` and `--rnd` end to end on the real memory and sparse_goal games: a few updates, the
checkpoint, refused resumes, the policy file and its in-engine parity; the recurrent rollout's bookkeeping."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from helpers import REPO, read_scalars, run_dirs
from python_trainer import cli
from python_trainer import agent as agent_mod
from python_trainer import normalization, rollout
from python_trainer.engine import in_engine
from python_trainer.variants import recurrent, trained_agent
from python_trainer.run import train
from python_trainer.rollout import evaluate
from python_trainer.envs.vec_env import make_vec_env

SHORT = ["--num-steps", "64", "--total-timesteps", "2048", "--eval-episodes", "2", "--checkpoint-every", "1"]


@pytest.mark.slow
def test_lstm_trains_saves_plays_in_engine_and_refuses_a_mismatched_resume(tmp_path, capsys, headless_export):
    argv = ["--env-id", "memory", "--lstm", "--lstm-size", "16", *SHORT, "--run-dir-root", str(tmp_path)]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path)
    loaded = trained_agent.load_agent(run_dir)
    assert loaded.agent.recurrent and loaded.agent.lstm.hidden_size == 16 and loaded.global_step == 2048
    assert "eval: deterministic policy, 2 episodes" in capsys.readouterr().out

    # resuming it without the LSTM is refused, naming the mismatch; nothing is trained
    assert cli.main(["train", "--resume", str(run_dir), "--no-lstm", "--total-timesteps", "4096"]) == 2
    err = capsys.readouterr().err
    assert "the checkpoint's agent has an LSTM (--lstm)" in err and "without --lstm" in err
    assert cli.main(["train", "--resume", str(run_dir), "--lstm-size", "32", "--total-timesteps", "4096"]) == 2
    assert "--lstm-size 16, not 32" in capsys.readouterr().err
    assert trained_agent.load_agent(run_dir).global_step == 2048

    # the policy file carries the LSTM; the engine's forward pass over a sequence (with resets) equals PyTorch's
    policy = json.loads((run_dir / "policy.json").read_text())
    assert policy["lstm"]["hidden_size"] == 16 and policy["lstm"]["after_layer"] == 2
    rng = np.random.default_rng(3)
    obs = rng.uniform(-1.5, 1.5, (40, 4)).astype(np.float32)
    dones = np.zeros(40, bool)
    dones[[0, 17, 18, 30]] = True  # two resets in a row: an episode of one step
    outputs, _ = in_engine.policy_forward(run_dir / "policy.json", obs, dones=dones)
    agent = loaded.agent
    with torch.no_grad():
        h, _ = agent.lstm(agent.encoder(torch.from_numpy(obs)), agent.lstm.initial_state(1),
                          torch.from_numpy(dones.astype(np.float32)))
        expected = agent.actor(h).numpy().astype(np.float64)
    assert np.abs(expected).max() > 1e-3
    assert np.abs(outputs - expected).max() < 1e-5
    # the memory matters: without the resets the same observations give other outputs after the first reset
    no_reset, _ = in_engine.policy_forward(run_dir / "policy.json", obs, dones=np.zeros(40, bool))
    assert np.abs(no_reset[:17] - outputs[:17]).max() < 1e-9 and np.abs(no_reset[17:] - outputs[17:]).max() > 1e-7


def test_resuming_a_plain_run_with_lstm_or_rnd_is_refused(tmp_path, capsys):
    base = ["--env-id", "CartPole-v1", "--num-steps", "32", "--eval-episodes", "0", "--run-dir-root", str(tmp_path)]
    assert train.main([*base, "--total-timesteps", "128", "--checkpoint-every", "1"]) == 0
    (run_dir,) = run_dirs(tmp_path)
    assert cli.main(["train", "--resume", str(run_dir), "--lstm", "--total-timesteps", "256"]) == 2
    assert "the checkpoint's agent has no LSTM, and this run asks for one with --lstm" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(run_dir), "--rnd", "--total-timesteps", "256"]) == 2
    assert "was trained without --rnd" in capsys.readouterr().err


def test_recurrent_rollout_replays_exactly_in_the_update(tmp_path, headless_export):
    """The state carried through a pipelined rollout (2 groups of instances, episodes ending mid-rollout) is the one
    the update rebuilds from the rollout's initial state, the dones and whole-env minibatches: every stored
    log-probability and value comes out again (ratio 1 before the first gradient step)."""
    envs = make_vec_env("memory", num_instances=2, agents_per_instance=3, run_dir=tmp_path, seed=2)
    try:
        assert len(envs.groups) == 2
        torch.manual_seed(0)
        agent = recurrent.RecurrentAgent(4, envs.single_action_space, 8)
        normalizer = normalization.Normalizer(4, envs.num_envs, 0.99, False, False)
        buf = rollout.RolloutBuffer(50, envs.num_envs, 4, agent)
        buf.next_obs[:] = envs.reset(seed=2)[0]
        for _ in range(2):  # the second rollout starts from the state the first one left
            rollout.collect_rollout(envs, agent, normalizer, buf, pipeline=True)
            assert buf.dones[1:].sum() >= 6  # episodes ended (memory's are at most 64 steps; 25 here)
            assert buf.initial_state.h.abs().sum() > 0 or _ == 0
            b_obs = torch.from_numpy(buf.obs.reshape(-1, 4))
            b_actions = torch.from_numpy(buf.actions.reshape(-1))
            b_dones = torch.from_numpy(buf.dones.reshape(-1))
            for envs_mb, flat in recurrent.env_minibatches(50, envs.num_envs, 3, np.random.default_rng(0)):
                with torch.no_grad():
                    _, logprob, _, value, _ = agent.get_action_and_value(
                        b_obs[flat], b_actions[flat], buf.initial_state[envs_mb], b_dones[flat]
                    )
                np.testing.assert_allclose(logprob.numpy(), buf.logprobs.reshape(-1)[flat], atol=1e-5)
                np.testing.assert_allclose(value[:, 0].numpy(), buf.values[..., 0].reshape(-1)[flat], atol=1e-5)
    finally:
        envs.close()


@pytest.mark.slow
def test_rnd_trains_logs_both_returns_and_keeps_its_state(tmp_path, capsys, headless_export):
    argv = ["--env-id", "sparse_goal", "--rnd", "--agents-per-instance", "8", *SHORT, "--run-dir-root", str(tmp_path)]
    assert train.main(argv) == 0
    (run_dir,) = run_dirs(tmp_path)
    scalars = read_scalars(run_dir)
    assert {"charts/intrinsic_return", "charts/intrinsic_reward", "losses/rnd_loss"} <= set(scalars)
    ckpt = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert ckpt["rnd"]["stats"]["obs_rms"]["count"] > 8 * 50  # the warm-up and the rollouts' observations
    assert any(k.startswith("predictor.") for k in ckpt["rnd"]["model"])
    assert ckpt["model"]["critic.4.weight"].shape[0] == 2  # V_ext and V_int
    capsys.readouterr()
    assert cli.main(["train", "--resume", str(run_dir), "--no-rnd", "--total-timesteps", "4096"]) == 2
    assert "was trained with --rnd" in capsys.readouterr().err
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "3072", "--eval-episodes", "0"]) == 0
    assert trained_agent.load_agent(run_dir).global_step == 3072
    assert json.loads((run_dir / "policy.json").read_text())["lstm"] is None


@pytest.mark.parametrize("space", [
    gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    gym.spaces.MultiDiscrete([3, 2]),
    gym.spaces.Dict({"move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "jump": gym.spaces.Discrete(2)}),
])
def test_recurrent_agent_keeps_every_action_head(space):
    """The LSTM sits before the same per-key heads: sampled actions re-evaluate to the same log-probabilities, the
    deterministic action has the space's layout, and an episode start forgets (the output equals a fresh state's)."""
    torch.manual_seed(0)
    agent = recurrent.RecurrentAgent(5, space, 8, rnd=True)
    x = torch.randn(6 * 2, 5)  # 6 steps x 2 envs, time-major
    done = torch.zeros(12)
    done[8] = 1.0  # env 0 starts a new episode at step 4
    state = agent.initial_state(2)
    action, logprob, _, value, _ = agent.get_action_and_value(x, None, state, done)
    assert value.shape == (12, 2)  # V_ext and V_int
    _, again, _, _, _ = agent.get_action_and_value(x, action, state, done)
    torch.testing.assert_close(again, logprob)
    with torch.no_grad():
        det, _ = agent.act(x, True, state, done)
        fresh, _ = agent.act(x[8:9], True, agent.initial_state(1), torch.zeros(1))
    assert det.shape[0] == 12 and agent_mod.env_action(space, det.numpy()) is not None
    torch.testing.assert_close(det[8:9], fresh)


def test_pretrained_memory_policy_remembers_in_the_engine_and_in_python(tmp_path, headless_export):
    """exports/policies/memory_lstm.json (memory_lstm_1 of bench_memory_exploration.py): the engine's player keeps
    one LSTM state per agent and resets it with each episode, so 16 agents never miss; so does the PyTorch model."""
    policies = REPO / "exports" / "policies"
    report = in_engine.evaluate_in_engine(policies / "memory_lstm.json", episodes=32, agents=16, seed=4, timeout=90)
    assert report["episodes"] == 32 and report["mean_return"] >= 0.9
    loaded = trained_agent.load_agent(policies / "memory_lstm_model.pt")
    envs = make_vec_env("memory", num_instances=1, agents_per_instance=16, run_dir=tmp_path, seed=4)
    try:
        returns = evaluate(loaded.act, envs, 32, seed=4)
    finally:
        envs.close()
    assert len(returns) == 32 and np.mean(returns) >= 0.9
