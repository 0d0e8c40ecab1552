"""jumper: how often a policy reaches the goal, against random play, and how fast the game simulates.

1. Goal share: episodes (16 arenas, seed --seed) in which the agent reaches the goal platform at least once, from
   the game's own episode info ("reached_goal", "goals"), for uniformly random actions (from Python, the hybrid
   action space's sample()) and for the deterministic policy of a checkpoint (from Python: LoadedAgent.act).
   Also the mean return of the in-engine policy file (`--policy=FILE --eval_episodes=N`, GDScript forward pass).
2. Engine speed: `--benchmark_steps` (random actions inside the engine, no trainer) for jumper and ball_chase,
   16 agents, headless: agent-steps/s of each.

    .venv/bin/python scripts/bench_jumper.py [--model exports/policies/jumper_model.pt] [--episodes 128]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from python_trainer import make_vec_env  # noqa: E402
from python_trainer.base import paths
from python_trainer.engine import in_engine  # noqa: E402
from python_trainer.variants.trained_agent import load_agent  # noqa: E402


def goal_share(act, episodes: int, seed: int) -> dict:
    """Play until `episodes` episodes have ended; their goal share, goals and returns."""
    env = make_vec_env("jumper", num_instances=1, agents_per_instance=16, seed=seed)
    try:
        obs, _ = env.reset(seed=seed)
        reached, goals, returns, lengths = [], [], [], []
        while len(reached) < episodes:
            obs, _, _, _, infos = env.step(act(env, obs))
            if "_final_info" in infos:
                for i in np.flatnonzero(infos["_final_info"]):
                    info = infos["final_info"][i]
                    reached.append(info["reached_goal"])
                    goals.append(info["goals"])
                    returns.append(infos["episode"]["r"][i])
                    lengths.append(infos["episode"]["l"][i])
        n = episodes
        return {"episodes": n, "goal_share": float(np.mean(reached[:n])), "goals_per_episode": float(np.mean(goals[:n])),
                "mean_return": float(np.mean(returns[:n])), "mean_length": float(np.mean(lengths[:n]))}
    finally:
        env.close()


def engine_rate(env_id: str, steps: int) -> float:
    binary = paths.export_binary(headless=True)
    result = subprocess.run([str(binary), "--fixed-fps", "60", f"--env={env_id}", "--agents=16",
                             f"--benchmark_steps={steps}"], capture_output=True, text=True, timeout=300)
    line = next(line for line in result.stdout.splitlines() if line.startswith('{"benchmark"'))
    return json.loads(line)["benchmark"]["agent_steps_per_second"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=str(REPO / "exports" / "policies" / "jumper_model.pt"))
    parser.add_argument("--policy", default=str(REPO / "exports" / "policies" / "jumper.json"))
    parser.add_argument("--episodes", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=4000, help="decision steps of each --benchmark_steps run")
    args = parser.parse_args()

    results = {"random": goal_share(lambda env, obs: env.action_space.sample(), args.episodes, args.seed)}
    print(json.dumps({"random": results["random"]}), flush=True)
    if Path(args.model).exists():
        loaded = load_agent(args.model)
        results["policy"] = goal_share(lambda env, obs: loaded.act(obs), args.episodes, args.seed)
        print(json.dumps({"policy": results["policy"]}), flush=True)
    if Path(args.policy).exists():
        report = in_engine.evaluate_in_engine(args.policy, episodes=args.episodes, seed=args.seed)
        results["policy_in_engine_mean_return"] = report["mean_return"]
        print(json.dumps({"policy_in_engine": {"episodes": report["episodes"], "mean_return": report["mean_return"]}}),
              flush=True)
    for env_id in ("jumper", "ball_chase"):
        results[f"{env_id}_engine_agent_steps_per_s"] = engine_rate(env_id, args.steps)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
