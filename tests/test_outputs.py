"""Outputs and full disks (issue 22): every output is checked before the work that fills it (files.check_output) and
written under a temporary name then renamed (files.atomic_output), so a read-only place, a path under a file or a
full disk costs one line and leaves no partial or empty file; training on a disk that fills up says what was kept
and what was lost, in one line, with no thread's traceback. A full disk is simulated in-process (a write raising
ENOSPC); a real small tmpfs is used only as root."""

import errno
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from python_trainer import cli
from python_trainer import checkpoint
from python_trainer.base import files
from python_trainer.engine import recording
from python_trainer.tools import play
from python_trainer.run import training
from python_trainer.checkpoint import load_checkpoint
from python_trainer.base.files import OutputError, check_output, remove_stale_scratch, scratch_dir

CARTPOLE = ["--env-id", "CartPole-v1", "--num-envs", "2", "--num-steps", "128", "--eval-episodes", "0"]


def _enospc(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _leftovers(folder: Path) -> list:
    """Temporary names of the atomic writer, and empty files, anywhere under ``folder``."""
    return [p for p in folder.rglob("*") if p.is_file() and (".tmp" in p.name or p.stat().st_size == 0)]


# ======================================================================================================================
# The check before the work
# ======================================================================================================================
def test_a_path_under_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(OutputError) as e:
        check_output(tmp_path / "a_file" / "clips" / "out.gif")
    assert str(e.value) == (f"cannot write {tmp_path / 'a_file' / 'clips' / 'out.gif'}: {tmp_path / 'a_file'} is a "
                            "file, not a folder; give a path in a folder")
    with pytest.raises(OutputError, match="it is a folder"):
        check_output(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_a_read_only_place_and_a_full_disk_are_refused_before_the_work(tmp_path, monkeypatch):
    """As root chmod stops nothing: the file system's refusals are simulated where the probe opens its file."""
    real_open = open

    def refusing_open(err):
        def fake(path, *args, **kwargs):
            if ".tmp" in str(path):
                raise OSError(err, os.strerror(err), str(path))
            return real_open(path, *args, **kwargs)
        return fake

    out = tmp_path / "new" / "clip.mp4"
    monkeypatch.setattr("builtins.open", refusing_open(errno.EROFS))
    with pytest.raises(OutputError, match="Read-only file system.*: that file system is read-only: write elsewhere"):
        check_output(out)
    monkeypatch.setattr("builtins.open", refusing_open(errno.ENOSPC))
    with pytest.raises(OutputError, match="No space left on device.*the disk is full: free some space"):
        check_output(out)
    monkeypatch.setattr("builtins.open", real_open)
    monkeypatch.setattr(files.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 2**20, 2**20))
    with pytest.raises(OutputError, match=r"needs about 5 MiB and .* has 1 MiB free"):
        check_output(out, 5 * 2**20)
    assert check_output(out, 2**19) == out and _leftovers(tmp_path) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_real_full_tmpfs(tmp_path):
    """A 64 KiB tmpfs: the check sees the lack of room; a write that fills it leaves nothing behind."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("this container may not mount a tmpfs (no CAP_SYS_ADMIN)")
    try:
        with pytest.raises(OutputError, match=r"needs about 1 MiB and .* has 64 KiB free"):
            check_output(mnt / "clip.gif", 2**20)
        with pytest.raises(OSError) as e:
            files.write_atomic(mnt / "big.bin", b"x" * 2**20)
        assert e.value.errno == errno.ENOSPC and list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# ======================================================================================================================
# Recording: checked first, written atomically, its scratch folder cleaned
# ======================================================================================================================
def _fake_recording_game(monkeypatch, calls):
    """`record` without Godot: the game's run writes 8 small PNG frames into its --record_dir."""
    from PIL import Image

    save = Image.Image.save  # a test may make Pillow's save fail later: the frames are written before that

    def run_recording(cmd, env, frame_dir, connect_timeout, timeout=None):
        calls.append(cmd)
        record_dir = Path(next(a.split("=", 1)[1] for a in cmd if a.startswith("--record_dir=")))
        for i in range(8):
            save(Image.new("RGB", (64, 36), (i * 30, 0, 0)), record_dir / f"frame_{i:05d}.png")
        return subprocess.CompletedProcess(cmd, 0, '{"run": {}}\n', "")

    monkeypatch.setattr(recording, "run_recording", run_recording)
    monkeypatch.setattr(recording, "open_display", lambda xvfb, say=print, hint="": ":99")
    monkeypatch.setattr(play, "policy_game", lambda *a, **k: None)
    monkeypatch.setattr(play, "ensure_policy", lambda src: Path(src))
    monkeypatch.setattr(recording.GameInstance, "command", lambda self, *args: ["game", *args])


def test_play_record_to_a_path_under_a_file_fails_before_the_game_runs(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_recording_game(monkeypatch, calls)
    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "a_file" / "clip.gif"
    assert cli.main(["play", str(tmp_path / "policy.json"), "--record", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"godot-ppo play: error: cannot write {out}: {tmp_path / 'a_file'} is a file, not a folder; "
                   "give a path in a folder\n")
    assert calls == []  # refused before recording


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_a_disk_that_fills_up_while_the_clip_is_written_leaves_no_file(tmp_path, monkeypatch, capsys, suffix):
    calls = []
    _fake_recording_game(monkeypatch, calls)
    out = tmp_path / "clips" / f"clip{suffix}"
    if suffix == ".gif":
        from PIL import Image

        def save(self, fp, *args, **kwargs):  # Pillow writes part of the file, then the disk is full
            Path(fp).write_bytes(b"GIF89a")
            _enospc()

        monkeypatch.setattr(Image.Image, "save", save)
    else:
        def ffmpeg(cmd, timeout=None, **kwargs):  # ffmpeg writes part of the file, then says the disk is full
            Path(cmd[-1]).write_bytes(b"\0\0\0\x18ftypmp42")
            return subprocess.CompletedProcess(cmd, 1, "", f"[out#0/mp4] Error writing {cmd[-1]}: No space left "
                                               "on device\nConversion failed!\n")

        monkeypatch.setattr(recording, "run_to_end", ffmpeg)
    assert cli.main(["play", str(tmp_path / "policy.json"), "--record", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"godot-ppo play: error: cannot write {out} (No space left on "
                                                   "device): the disk is full"), err
    assert len(calls) == 1 and list((tmp_path / "clips").iterdir()) == []


def test_capture_video_on_a_full_disk_leaves_no_final_mp4(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_recording_game(monkeypatch, calls)
    monkeypatch.setattr(recording, "run_to_end", lambda cmd, timeout=None, **kw: (
        Path(cmd[-1]).write_bytes(b""), subprocess.CompletedProcess(cmd, 1, "", "No space left on device\n"))[1])
    training.record_final_video(tmp_path, game=None, seed=1)
    err = capsys.readouterr().err
    assert err.startswith("warning: --capture-video: no video (cannot write") and "the disk is full" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "videos" / "final.mp4").exists()
    assert _leftovers(tmp_path) == []


def test_the_frames_folder_of_a_killed_recording_is_removed_by_the_next(tmp_path):
    """A folder named for a process that no longer runs is removed; one of a running process is not."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{recording.RECORD_PREFIX}{dead.pid}-abcd"
    live = tmp_path / f"{recording.RECORD_PREFIX}{os.getppid()}-efgh"
    for d in (stale, live):
        d.mkdir()
        (d / "frame_00000.png").write_bytes(b"png")
    with scratch_dir(recording.RECORD_PREFIX, root=tmp_path) as mine:
        assert mine.name.startswith(f"{recording.RECORD_PREFIX}{os.getpid()}-")
        assert not stale.exists() and live.exists()
        assert remove_stale_scratch(recording.RECORD_PREFIX, root=tmp_path) == []  # ours runs: kept
    assert not mine.exists() and live.exists()


# ======================================================================================================================
# Profiles
# ======================================================================================================================
def test_profile_out_under_a_file_is_refused_before_any_instance(tmp_path, capsys, headless_export):
    from python_trainer import cli

    (tmp_path / "a_file").write_text("x")
    out = tmp_path / "a_file" / "profile"
    assert cli.main(["profile", "--modes", "headless", "--num-instances", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"godot-ppo profile: error: --out: cannot write {out}: {tmp_path / 'a_file'} is a file, not a "
                   "folder; give a path in a folder\n")


def test_a_profile_report_on_a_full_disk_keeps_the_previous_files(tmp_path, monkeypatch):
    from python_trainer.tools.profile import report as profiling

    (tmp_path / "profile.csv").write_text("the previous report\n")

    def write_csv(path, results):
        Path(path).write_text("key,mode\n")
        _enospc()

    monkeypatch.setattr(profiling, "write_csv", write_csv)
    report = {"results": [], "machine": {"cores_logical": 2}}
    with pytest.raises(OutputError) as e:
        profiling.write_outputs(tmp_path, report, png=False)
    assert str(e.value).startswith(f"cannot write {tmp_path / 'profile.csv'} (No space left on device): the disk is full")
    assert (tmp_path / "profile.csv").read_text() == "the previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profile.csv", "profile.json"]


# ======================================================================================================================
# Training on a disk that fills up
# ======================================================================================================================
def test_a_disk_that_fills_up_during_training_costs_one_line_and_leaves_no_empty_file(tmp_path, monkeypatch, capsys):
    """The disk is full after the second checkpoint: TensorBoard's writer thread fails first (its traceback is not
    printed), then the checkpoint of the way out; one line names the checkpoint kept and the steps lost."""
    from tensorboard.summary.writer import record_writer

    full = {"on": False, "saves": 0}
    real_save, real_write = checkpoint.torch.save, record_writer.RecordWriter.write

    def save(obj, f, *args, **kwargs):
        if full["on"]:
            f.write(b"PK\x03\x04 part of an archive")
            _enospc()
        real_save(obj, f, *args, **kwargs)
        full["saves"] += 1
        full["on"] = full["saves"] == 2  # after the second update's checkpoint, the disk is full

    def write(self, data):
        if full["on"]:
            _enospc()
        return real_write(self, data)

    unhandled = []
    monkeypatch.setattr(threading, "excepthook", lambda args: unhandled.append(args))
    monkeypatch.setattr(checkpoint.torch, "save", save)
    monkeypatch.setattr(record_writer.RecordWriter, "write", write)
    argv = [*CARTPOLE, "--total-timesteps", str(256 * 6), "--checkpoint-every", "1", "--run-dir-root", str(tmp_path)]
    assert cli.main(["train", *argv]) == 1
    err = capsys.readouterr().err
    (run_dir,) = list(tmp_path.iterdir())
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("godot-ppo train: error: the disk is full (No space left on device): "), err
    # TensorBoard's error reaches the training thread at an add_scalar of the third update (the checkpoint of the
    # second is the last completed update's: nothing to write) or at its flush before the third checkpoint
    assert (f"checkpoint at global step 512 (the last completed update) in {run_dir / 'checkpoint.pt'}; " in err
            or f"the checkpoint at step 512 is intact ({run_dir / 'checkpoint.pt'}); the 256 steps trained after "
               "it are lost; free some space, then continue" in err), err
    assert f"godot-ppo train --resume {run_dir}" in err
    assert unhandled == [], [a.exc_value for a in unhandled]  # the writer thread's error was not printed
    assert load_checkpoint(run_dir / "checkpoint.pt")["global_step"] == 512
    assert _leftovers(run_dir) == [] and not (run_dir / "error.log").exists()


def test_a_game_log_on_a_full_disk_drops_output_without_blocking_the_game_or_a_traceback(tmp_path, monkeypatch):
    """The launcher's log reader thread: a write the disk refuses drops the output and keeps draining the pipe (a
    game whose pipe fills up would block), with no thread's traceback."""
    from python_trainer.envs import logs

    unhandled = []
    monkeypatch.setattr(threading, "excepthook", lambda args: unhandled.append(args))
    log = logs.CappedLog(tmp_path / "instance_0.log")
    monkeypatch.setattr(logs.os, "pwrite", _enospc)
    read_end, write_end = os.pipe()
    log.follow(read_end)
    writer = threading.Thread(target=lambda: [os.write(write_end, b"SCRIPT ERROR: x\n" * 4096) for _ in range(8)],
                              daemon=True)
    writer.start()
    writer.join(timeout=20)  # 512 KiB through a 64 KiB pipe: only if it is drained
    assert not writer.is_alive(), "the game would block on its full pipe"
    os.close(write_end)
    log.close(timeout=10)
    assert unhandled == [] and log.write_error.errno == errno.ENOSPC and log.bytes_in == 8 * 4096 * 16
