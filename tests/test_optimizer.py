"""optimizer.Adam and optimizer.clip_grad_norm against torch.optim.Adam(fused=True) and clip_grad_norm_: the same
numbers bit for bit, step by step, with the learning rate changed between steps; the same state_dict, loadable both
ways (a checkpoint written with torch's optimizer resumes with ours, and the other way round)."""

import copy

import gymnasium as gym
import numpy as np
import torch

from helpers import REPO
from python_trainer.agent import Agent
from python_trainer.optimizer import Adam, clip_grad_norm


def _pair():
    torch.manual_seed(0)
    ours = Agent(6, gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,), np.float32), "b": gym.spaces.Discrete(3)}))
    theirs = copy.deepcopy(ours)
    return ours, theirs


def _loss(agent, x):
    _, logprob, entropy, value, _ = agent.get_action_and_value(x, torch.cat([x[:, :2], (x[:, 2:3] > 0).float()], 1))
    return (logprob * x[:, 0]).mean() - 0.01 * entropy.mean() + value.pow(2).mean()


def test_adam_and_clipping_are_torchs_bit_for_bit():
    ours, theirs = _pair()
    opt_ours = Adam(ours.parameters(), lr=1e-2, eps=1e-5)
    opt_theirs = torch.optim.Adam(theirs.parameters(), lr=1e-2, eps=1e-5, fused=True)
    for step in range(30):
        x = torch.randn(64, 6) * 3
        for agent, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.param_groups[0]["lr"] = 1e-2 * (1 - step / 30)  # annealed, as ppo.py does
            opt.zero_grad()
            _loss(agent, x).backward()
        norm_ours = clip_grad_norm(opt_ours.params, 0.5)
        norm_theirs = torch.nn.utils.clip_grad_norm_(list(theirs.parameters()), 0.5)
        assert torch.equal(norm_ours, norm_theirs)
        opt_ours.step()
        opt_theirs.step()
        for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
            assert torch.equal(a, b), (step, name)
    mine, torchs = opt_ours.state_dict(), opt_theirs.state_dict()
    assert mine["param_groups"] == torchs["param_groups"]
    assert mine["state"].keys() == torchs["state"].keys()
    for i in mine["state"]:
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(mine["state"][i][key], torchs["state"][i][key]) and \
                mine["state"][i][key].dtype == torchs["state"][i][key].dtype
    torch.optim.Adam(theirs.parameters(), lr=1.0, fused=True).load_state_dict(mine)  # ours loads into torch's


def test_a_checkpoint_written_with_torchs_adam_resumes_with_ours():
    ckpt = torch.load(REPO / "tests" / "fixtures" / "main_7743056" / "ball_chase_pipelined" / "model.pt",
                      weights_only=True)  # written by main 7743056, whose trainer used torch.optim.Adam
    agent = Agent(12, gym.spaces.Box(-1, 1, (2,), np.float32))
    agent.load_state_dict(ckpt["model"])
    opt = Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    opt.load_state_dict(ckpt["optimizer"])
    assert opt.param_groups[0]["lr"] == ckpt["optimizer"]["param_groups"][0]["lr"]
    assert int(opt.state[opt.params[0]]["step"]) == int(ckpt["optimizer"]["state"][0]["step"])
    saved = opt.state_dict()
    assert saved["param_groups"] == ckpt["optimizer"]["param_groups"]
    for i, state in ckpt["optimizer"]["state"].items():
        assert all(torch.equal(saved["state"][i][k], state[k]) for k in ("step", "exp_avg", "exp_avg_sq"))
