"""The course documents' gymnasium tasks as written: LunarLander-v3 after the set-up, a missing optional dependency as
one line, the CartPole lecture's ablation flags, and CleanRL's --capture-video (mp4 through imageio-ffmpeg)."""

import json
import subprocess
import sys

import pytest

from helpers import REPO
from python_trainer.run import train as train_command


def train(tmp_path, *flags, preamble="", timeout=240):
    """`godot-ppo train FLAGS` in a child process (``preamble``: Python run before it, e.g. to hide a module)."""
    code = (f"import sys\n{preamble}\nfrom python_trainer.cli import main\n"
            f"sys.exit(main(['train', *{list(flags)!r}, '--run-dir-root', {str(tmp_path)!r}]))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def run_dir(tmp_path, env_id):
    (found,) = tmp_path.glob(f"{env_id}__*")
    return found


@pytest.mark.slow
def test_lunar_lander_trains_after_the_set_up(tmp_path):
    result = train(tmp_path, "--env-id", "LunarLander-v3", "--total-timesteps", "1024", "--num-envs", "2",
                   "--num-steps", "256", "--eval-episodes", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run_dir(tmp_path, "LunarLander-v3") / "model.pt").is_file()


def test_a_missing_optional_dependency_is_one_line_naming_the_package(tmp_path):
    hide_box2d = "sys.modules['Box2D'] = None  # as if the box2d wheel were not installed"
    result = train(tmp_path, "--env-id", "LunarLander-v3", "--total-timesteps", "512", preamble=hide_box2d)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "godot-ppo train: error: LunarLander-v3 needs the Python package 'box2d', which is not installed: "
        "pip install box2d"
    ]  # no traceback, no AttributeError from a half-built vector env
    assert list(tmp_path.iterdir()) == []  # no run folder left behind


@pytest.mark.slow
def test_the_cartpole_lectures_ablations_run_as_flags(tmp_path):
    args = train_command.Args(env_id="CartPole-v1", update_epochs=1, gae_lambda=1.0, clip=False)
    assert (args.update_epochs, args.gae_lambda, args.clip) == (1, 1.0, False)
    result = train(tmp_path, "--env-id", "Acrobot-v1", "--update-epochs", "1", "--gae-lambda", "1.0", "--no-clip",
                   "--total-timesteps", "1024", "--eval-episodes", "0")
    assert result.returncode == 0, result.stderr[-2000:]
    saved = json.loads((run_dir(tmp_path, "Acrobot-v1") / "args.json").read_text())
    assert (saved["update_epochs"], saved["gae_lambda"], saved["clip"]) == (1, 1.0, False)


@pytest.mark.slow
def test_capture_video_of_a_gymnasium_id_writes_mp4s(tmp_path):
    result = train(tmp_path, "--env-id", "CartPole-v1", "--capture-video", "--total-timesteps", "1024",
                   "--eval-episodes", "0")
    assert result.returncode == 0, result.stderr[-2000:]
    videos = sorted((run_dir(tmp_path, "CartPole-v1") / "videos").glob("*.mp4"))
    # CleanRL's schedule: episodes 0, 1, 8, 27... of the first env (1024 steps hold a few dozen episodes)
    assert [v.name for v in videos][:2] == ["rl-video-episode-0.mp4", "rl-video-episode-1.mp4"], videos
    assert all(v.read_bytes()[4:8] == b"ftyp" for v in videos)  # real mp4 files
