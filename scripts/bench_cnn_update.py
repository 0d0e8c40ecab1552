"""Benchmark: the PPO update's cost per 4,096 samples with the CNN agent (variants/cnn_agent.py), and acting's per
step, on a camera game's rows without a game: 36 x 36 x 3 images (forager's) beside 3 vector values, torch threads
1 and 2.

    .venv/bin/python scripts/bench_cnn_update.py [--encoder simple|nature] [--side 36] [--channels 3]
                                                 [--threads 1 2] [--updates 6] [--lstm]

Each thread count runs in its own process: ``ppo.iterations`` over a rollout buffer of 128 steps x 32 envs (the
image block kept as uint8: obs_store.py) filled with random frames, with the default epochs and minibatches (4 x 4,
minibatches of 1,024), and ``perf/update_s`` per update, scaled to 4,096 samples; then the rollout's acting
(``agent.rollout_policy()``: the encoder in torch, the heads on numpy) for a group of 16 envs. It prints the median
and the best of the updates after the first (the warm-up), the buffer's bytes against a float32 buffer's, and the
MLP agent's update on the vector part alone, for scale.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
import gymnasium as gym, numpy as np, torch
from python_trainer import ppo
from python_trainer.envs.images import ImageLayout
from python_trainer.normalization import Normalizer
from python_trainer.optimizer import Adam
from python_trainer.rollout import RolloutBuffer
from python_trainer.variants.trained_agent import make_agent

threads, encoder, side, channels, updates, lstm = json.loads(sys.argv[1])
torch.set_num_threads(threads)
torch.manual_seed(0)
STEPS, N, VECTOR = 128, 32, 3
layout = ImageLayout("camera_2d", side, side, channels, VECTOR)
space = gym.spaces.Dict({"move": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "turn": gym.spaces.Discrete(3)})


class NoRollouts:
    num_envs = N

    def __init__(self, buf):
        self.buf = buf

    def collect(self, *args):
        self.buf.policy_s = self.buf.env_wait_s = 0.0


def update_ms(image):
    agent = make_agent(layout.row_size if image else VECTOR, space, {"cnn": encoder, "lstm": lstm},
                       layout if image else None)
    dim = layout.row_size if image else VECTOR
    buf = RolloutBuffer(STEPS, N, dim, agent)
    rng = np.random.default_rng(0)
    rows = np.empty((STEPS, N, dim), np.float32)
    rows[..., :VECTOR] = rng.standard_normal((STEPS, N, VECTOR))
    rows[..., VECTOR:] = rng.integers(0, 256, (STEPS, N, dim - VECTOR))
    buf.obs[:] = rows
    buf.actions[:] = np.concatenate([rng.standard_normal((STEPS, N, 2)), rng.integers(0, 3, (STEPS, N, 1))], -1)
    buf.logprobs[:] = -3.0 + 0.1 * rng.standard_normal(buf.logprobs.shape)
    buf.rewards[:] = rng.standard_normal(buf.rewards.shape)
    buf.next_obs[:] = rows[0]
    normalizer = Normalizer(dim, N, 0.99, True, True, vector_mask=layout.vector_mask() if image else None)
    optimizer = Adam(agent.parameters(), lr=2.5e-4, eps=1e-5)
    times = [it.scalars["perf/update_s"] for it in ppo.iterations(
        ppo.Args(), agent, optimizer, NoRollouts(buf), buf, normalizer, num_iterations=updates)]
    acting = []
    if image:
        policy, x = agent.rollout_policy(), rows[0, :16].copy()
        state, done = agent.initial_state(16), np.zeros(16, np.float32)
        for _ in range(30):
            t0 = time.perf_counter()
            policy(x, state, done)
            acting.append(time.perf_counter() - t0)
    return ([1e3 * t * 4096 / (STEPS * N) for t in times[1:]], [1e6 * a for a in acting[5:]],
            int(buf.obs.nbytes), STEPS * N * dim * 4)


cnn, acting, nbytes, float_bytes = update_ms(True)
mlp = update_ms(False)[0]
print(json.dumps({"cnn_ms": cnn, "acting_us": acting, "mlp_ms": mlp, "buffer_bytes": nbytes,
                  "float_buffer_bytes": float_bytes}))
"""


def measure(threads: int, args) -> dict:
    config = json.dumps([threads, args.encoder, args.side, args.channels, args.updates, args.lstm])
    out = subprocess.run([sys.executable, "-c", CHILD, config], cwd=REPO, capture_output=True, text=True,
                         timeout=1800, env=dict(os.environ, PYTHONPATH=str(REPO)))
    if out.returncode != 0:
        raise SystemExit(f"the measurement with {threads} thread(s) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--encoder", default="simple", choices=["simple", "nature"])
    parser.add_argument("--side", type=int, default=36)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--updates", type=int, default=6, help="updates per thread count (the first is a warm-up)")
    parser.add_argument("--lstm", action="store_true", help="the --lstm agent on the CNN")
    args = parser.parse_args()
    shape = f"{args.side} x {args.side} x {args.channels}"
    print(f"the {args.encoder} encoder{' + LSTM' if args.lstm else ''}, {shape} images beside 3 vector values, "
          "128 steps x 32 envs, 4 epochs x 4 minibatches")
    print(f"{'threads':>7} {'CNN update ms/4096 (median, best)':>36} {'MLP (vector) ms/4096':>22} "
          f"{'acting us/16 envs':>18}")
    for threads in args.threads:
        r = measure(threads, args)
        cnn, mlp, acting = (np.array(r[k]) for k in ("cnn_ms", "mlp_ms", "acting_us"))
        print(f"{threads:>7} {np.median(cnn):>26.0f} {cnn.min():>9.0f} {np.median(mlp):>22.1f} "
              f"{np.median(acting):>18.0f}")
    print(f"rollout buffer's observations: {r['buffer_bytes'] / 2**20:.1f} MiB (a float32 buffer: "
          f"{r['float_buffer_bytes'] / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
