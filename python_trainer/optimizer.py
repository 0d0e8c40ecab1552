"""The update's Adam step and gradient clipping: torch's own fused kernels, called without torch.optim's wrappers.

`Adam` is ``torch.optim.Adam(params, lr, eps=eps, fused=True)`` (the same `torch._fused_adam_` kernel, the same state,
the same state_dict, so checkpoints load either way and the numbers are bit for bit the same); `clip_grad_norm` is
``torch.nn.utils.clip_grad_norm_(params, max_norm)`` (the same foreach kernels). Why not the originals: on the small
networks of these games their Python wrappers cost more than the work, 170 and 230 us of a minibatch's few ms on
this 2-core machine against 85 and 30 us here, and constructing a torch.optim optimizer imports torch._dynamo (and
sympy), 1.3 s of every training's start-up. tests/test_optimizer.py checks both against torch's, step by step.
"""

from __future__ import annotations

import torch


class Adam:
    """torch.optim.Adam with fused=True and one parameter group: ``param_groups[0]["lr"]`` can be changed between
    steps (learning-rate annealing); state_dict() / load_state_dict() use torch.optim.Adam's format."""

    def __init__(self, params, lr: float, eps: float = 1e-8, betas: tuple = (0.9, 0.999)):
        self.params = list(params)
        self.param_groups = [{"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": 0, "amsgrad": False,
                              "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                              "fused": True, "decoupled_weight_decay": False, "params": self.params}]
        self.state: dict = {}  # param -> {"step", "exp_avg", "exp_avg_sq"}, made at the first step (as torch does)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None  # torch's default (set_to_none): backward writes fresh gradients

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        params = [p for p in self.params if p.grad is not None]
        for p in params:
            if p not in self.state:
                self.state[p] = {"step": torch.zeros((), dtype=torch.float32), "exp_avg": torch.zeros_like(p),
                                 "exp_avg_sq": torch.zeros_like(p)}
        states = [self.state[p] for p in params]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(params, [p.grad for p in params], [s["exp_avg"] for s in states],
                           [s["exp_avg_sq"] for s in states], [], steps, amsgrad=False, lr=group["lr"], beta1=beta1,
                           beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                           grad_scale=None, found_inf=None)

    def state_dict(self) -> dict:
        index = {p: i for i, p in enumerate(self.params)}
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        return {"state": {index[p]: dict(s) for p, s in self.state.items()},
                "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: dict) -> None:
        """torch.optim.Adam's state_dict (one group of as many parameters): its settings and per-parameter state."""
        (group,) = state_dict["param_groups"]
        if len(group["params"]) != len(self.params):
            raise ValueError(f"the optimizer state holds {len(group['params'])} parameters, the model has "
                             f"{len(self.params)}")
        self.param_groups[0].update({k: v for k, v in group.items() if k != "params"})
        self.param_groups[0]["betas"] = tuple(self.param_groups[0]["betas"])
        self.state = {}
        for i, p in zip(group["params"], self.params):
            if i in state_dict["state"]:
                s = state_dict["state"][i]
                self.state[p] = {"step": s["step"].detach().to(torch.float32).clone(),
                                 "exp_avg": s["exp_avg"].detach().to(p.dtype).clone(),
                                 "exp_avg_sq": s["exp_avg_sq"].detach().to(p.dtype).clone()}


@torch.no_grad()
def clip_grad_norm(params, max_norm: float) -> torch.Tensor:
    """Scale the gradients so that their global 2-norm is at most ``max_norm``; returns the norm before."""
    grads = [p.grad for p in params if p.grad is not None]
    total_norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads, 2.0)), 2.0)
    torch._foreach_mul_(grads, torch.clamp(float(max_norm) / (total_norm + 1e-6), max=1.0))
    return total_norm
