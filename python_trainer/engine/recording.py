"""A recording of a policy playing inside the windowed game (under Xvfb without $DISPLAY): the game's PNG frames made
into a GIF (Pillow) or an MP4 (the ffmpeg that imageio-ffmpeg ships), for `play --record` and `train --capture-video`.

    record("runs/ball_chase__ppo__1__1700000000/policy.json", "ball_chase.gif", godot_game("ball_chase"), seconds=10)
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path
from typing import Optional, Sequence

from python_trainer.base.contract import RUN_REPORT, arg, flag
from python_trainer.base.errors import one_line
from python_trainer.base.files import OutputError, atomic_output, check_output, scratch_dir, write_error
from python_trainer.base.flags import DEFAULT_CONNECT_TIMEOUT_S
from python_trainer.base.processes import end_process_tree, run_to_end, spawn
from python_trainer.engine.in_engine import PlaybackError, engine_policy_arg, game_error, json_line, trained_env_params
from python_trainer.envs.env_params import binary_flags
from python_trainer.envs.game import FIXED_FPS, GameInstance, GodotGame, game_environ
from python_trainer.envs.xvfb import open_display, temp_xvfb

RECORD_EVERY = 4  # record every 4th frame of the game's 60 physics frames per second -> a 15 fps clip at true speed
CLIP_FPS = FIXED_FPS / RECORD_EVERY
GIF_WIDTH = 512
FFMPEG_TIMEOUT_S = 600.0
# The recording waits on the game's progress, not for a fixed total: it gives up once no new frame has come for
# SILENCE_S seconds (the first one may take the game's load, --connect-timeout, longer). A window drawn at a few
# frames per second under load still finishes.
SILENCE_S = 30.0
POLL_S = 0.25
RECORD_PREFIX = "godot-ppo-record-"  # the recording's frames: <temp dir>/godot-ppo-record-<pid>-XXXX/frame_*.png
# Rough bytes per recorded frame, for the room checked before recording: the game's PNG frames in the temp dir, and
# the clip made of them at GIF_WIDTH. Measured on ball_chase (4 agents): 18 kB a PNG frame, 6 kB of GIF, 0.8 kB of
# mp4 (jumper less); about ten times that, for bigger windows and busier scenes.
ROUGH_FRAME_BYTES = {".png": 200_000, ".gif": 60_000, ".mp4": 10_000}


def assemble_gif(frames: Sequence[Path], out: Path, fps: float = CLIP_FPS, width: int = GIF_WIDTH) -> None:
    """PNG frames -> an optimised, looping GIF ``width`` pixels wide (one shared palette, delta frames)."""
    from PIL import Image

    if not frames:
        raise PlaybackError("the recording produced no frames")
    images = []
    palette_src = None
    for f in frames:
        with Image.open(f) as im:
            im = im.convert("RGB")
            if im.width != width:
                im = im.resize((width, max(2, round(im.height * width / im.width))), Image.LANCZOS)
            if palette_src is None:  # one adaptive palette from the first frame keeps colours steady across frames
                palette_src = im.quantize(colors=64, method=Image.Quantize.MEDIANCUT)
            images.append(im.quantize(palette=palette_src, dither=Image.Dither.NONE))
    out.parent.mkdir(parents=True, exist_ok=True)
    # GIF delays are whole centiseconds: alternate them (7, 7, 6, ...) so the clip keeps true speed at 15 fps.
    ticks = [round(100 * (i + 1) / fps) - round(100 * i / fps) for i in range(len(images))]
    images[0].save(out, save_all=True, append_images=images[1:], duration=[10 * t for t in ticks], loop=0,
                   optimize=True, disposal=1)


def ffmpeg_exe() -> str:
    """The ffmpeg binary that the imageio-ffmpeg wheel ships (a dependency: mp4 needs no system ffmpeg)."""
    try:
        import imageio_ffmpeg
    except ImportError:
        raise PlaybackError("an mp4 needs the Python package 'imageio-ffmpeg' (it ships ffmpeg), which is not "
                            "installed: pip install imageio-ffmpeg; or record a .gif") from None
    try:
        return imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as e:  # a wheel without a binary for this platform, and no ffmpeg on PATH
        raise PlaybackError(f"no ffmpeg for an mp4 ({e}); record a .gif") from None


def assemble_mp4(frame_dir: Path, out: Path, fps: float = CLIP_FPS, width: int = GIF_WIDTH) -> None:
    """The PNG frames of ``frame_dir`` -> an H.264 MP4 ``width`` pixels wide."""
    ffmpeg = ffmpeg_exe()
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [ffmpeg, "-y", "-loglevel", "error", "-framerate", f"{fps:g}", "-i", str(frame_dir / "frame_%05d.png"),
           "-vf", f"scale={width}:-2", "-pix_fmt", "yuv420p", "-c:v", "libx264", str(out)]
    result = run_to_end(cmd, timeout=FFMPEG_TIMEOUT_S)  # like every child: it ends when we do
    if result.returncode != 0:
        if "No space left on device" in (result.stderr or ""):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out))  # said as the disk it is
        why = f"did not finish within {FFMPEG_TIMEOUT_S:g} s" if result.returncode is None else "failed"
        raise PlaybackError(f"ffmpeg {why}: {one_line(Exception(result.stderr or 'nothing printed'))}")


def record(policy_path, out, game: GodotGame, agents: int = 4, seed: int = 0, seconds: float = 10.0, say=print,
           timeout: Optional[float] = None, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
           extra_args=(), opponent: Optional[str] = None) -> dict:
    """Record ``seconds`` of game time of the policy in the windowed game (under Xvfb without $DISPLAY) into a GIF
    (Pillow) or an MP4 (ffmpeg). Returns {"out", "frames", "run": the game's run report}. ``extra_args``: more of the
    game's flags (e.g. --env_param=NAME=VALUE; none: the --env-param constants of the policy's run, as
    `trained_env_params` finds them, so `train --capture-video` records a run's game as it trained); ``opponent``: the game's --opponent (matches of a two-sided game,
    the policy on one team). The game is given as long as it keeps writing frames (SILENCE_S); ``timeout``, when
    given, caps the whole run.

    Before the game starts, ``out`` and the temporary frames' folder are checked (OutputError: a path under a file,
    a read-only place, no room for a rough size); the clip is written beside ``out`` and renamed, so a failure
    (OutputError for a full disk) leaves no partial file. The frames' folder is removed at the end, and the
    next recording removes those of a recording that was killed."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".gif", ".mp4"):
        raise PlaybackError(f"--record {out}: give a .gif or .mp4 file name")
    if suffix == ".mp4":
        ffmpeg_exe()  # its error before the game runs
    frames_total = max(RECORD_EVERY, int(round(FIXED_FPS * seconds)))
    n_frames = frames_total // RECORD_EVERY
    check_output(out, n_frames * ROUGH_FRAME_BYTES[suffix])
    with temp_xvfb() as xvfb, scratch_dir(RECORD_PREFIX) as tmp:
        try:
            check_output(tmp / "frame_00000.png", n_frames * ROUGH_FRAME_BYTES[".png"])
        except OutputError as e:
            raise OutputError(f"{e} (the recording's frames go to the temp dir: set TMPDIR to a folder with room)")
        extra_args = tuple(extra_args) or tuple(binary_flags(trained_env_params(policy_path)))
        instance = GameInstance(game, agents=agents, seed=seed, headless=False,
                                display=open_display(xvfb, say, "for the recording"), extra_args=extra_args)
        cmd = instance.command(arg("policy", engine_policy_arg(policy_path)), arg("record_dir", tmp),
                               arg("record_every", RECORD_EVERY), arg("quit_after_frames", frames_total),
                               flag("no_vsync"), *([arg("opponent", opponent)] if opponent is not None else []))
        say(f"recording {seconds:g} s of game time ({n_frames} frames at {CLIP_FPS:g} fps) -> {out}")
        result = run_recording(cmd, instance.environ(), tmp, connect_timeout, timeout)
        if result.returncode != 0:
            raise game_error(result, "the recording run")
        frames = sorted(tmp.glob("frame_*.png"))
        try:
            with atomic_output(out) as part:  # a temporary name beside out (same suffix), renamed when whole
                if suffix == ".gif":
                    assemble_gif(frames, part)
                else:
                    assemble_mp4(tmp, part)
        except OSError as e:
            raise write_error(out, e) from None
    return {"out": out, "frames": len(frames), "run": json_line(result.stdout, RUN_REPORT)}


def run_recording(cmd, env: dict, frame_dir: Path, connect_timeout: float, timeout: Optional[float] = None,
                  silence: float = SILENCE_S) -> subprocess.CompletedProcess:
    """Run the recording game to its end while it makes progress: ended (PlaybackError) once ``silence`` seconds
    pass with no new frame in ``frame_dir`` (``connect_timeout`` more before the first), or past ``timeout``."""
    out_path, err_path = frame_dir / "game.out", frame_dir / "game.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = spawn(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=game_environ(env))
    start = last_progress = time.monotonic()
    frames, why = 0, None
    try:
        while proc.poll() is None:
            try:
                proc.wait(timeout=POLL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            now, count = time.monotonic(), _frames_in(frame_dir)
            if count > frames:
                frames, last_progress = count, now
            wait = silence + (connect_timeout if frames == 0 else 0.0)
            if now - last_progress > wait:
                why = (f"wrote no frame for {wait:g} s (after {frames} frames)" if frames else
                       f"wrote no frame within {wait:g} s of its start (--connect-timeout + {silence:g} s)")
            elif timeout is not None and now - start > timeout:
                why = f"did not finish within {timeout:g} s ({frames} frames)"
            if why is not None:
                end_process_tree([proc.pid])
                proc.wait()
                break
    except BaseException:
        end_process_tree([proc.pid])
        proc.wait()
        raise
    stdout, stderr = (path.read_bytes().decode(errors="replace") for path in (out_path, err_path))
    if why is not None:
        raise PlaybackError(f"the recording stopped: the game {why}; the end of its output:\n{stderr[-2000:]}")
    return subprocess.CompletedProcess(list(cmd), proc.returncode, stdout, stderr)


def _frames_in(folder: Path) -> int:
    """The recorded frames so far (frame_*.png)."""
    with os.scandir(folder) as entries:
        return sum(1 for entry in entries if entry.name.startswith("frame_"))
