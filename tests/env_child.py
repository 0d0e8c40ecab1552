"""Child process for the no-orphans tests: start a GodotVecEnv, print {"pids": [...]} and then either step
forever (the test signals us) or raise an uncaught exception without closing anything.

usage: env_child.py fake|real INSTANCES step|raise [run_dir]
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from python_trainer.envs.vec_env import make_vec_env  # noqa: E402


def main():
    kind, instances, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    run_dir = sys.argv[4] if len(sys.argv) > 4 else None
    binary = [sys.executable, str(Path(__file__).resolve().parent / "fake_game.py")] if kind == "fake" else None
    env = make_vec_env("ball_chase", num_instances=instances, agents_per_instance=4, binary=binary,
                       connect_timeout=30, run_dir=run_dir)
    env.reset()
    print(json.dumps({"pids": env.launcher.pids()}), flush=True)
    if mode == "raise":
        env.step(env.action_space.sample())
        raise RuntimeError("uncaught on purpose; the launcher's atexit hook must end the instances")
    while True:
        env.step(env.action_space.sample())


if __name__ == "__main__":
    main()
