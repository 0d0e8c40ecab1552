"""Several policies in one game (issue 23), the policy file's side: version 3's "policy_name" and bundles written,
read and refused in Python; the engine playing tag (a chaser and a runner of different spaces) with a bundle and with
one file per policy, its one-line errors, and version 2 files still playing."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn

from helpers import REPO, wait_gone, xvfb_pid
from test_playback import COMMITTED_POLICY
from python_trainer.engine import in_engine
from python_trainer.tools import policy_export
from python_trainer.engine.policy_file import (POLICIES_DIR, PolicyFileError, game_policy, policy_bundle, policy_dict,
                                        policy_file_names, policy_json, read_policy, write_policies,
                                        write_policies_or_warn)
from python_trainer.variants.recurrent import RecurrentAgent

CHASER_KEYS = [{"key": "move", "action_type": "continuous", "size": 2}]
RUNNER_KEYS = [{"key": "move", "action_type": "discrete", "size": 5}]
SOURCE = {"global_step": 1000}


def chaser(name="chaser", env="tag") -> dict:
    """The chaser's policy: an MLP, 6 observations -> the 2 means of "move"."""
    torch.manual_seed(1)
    actor = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    return policy_dict(actor, None, CHASER_KEYS, env=env, source=SOURCE, where="test", policy_name=name)


def runner(name="runner") -> dict:
    """The runner's policy: recurrent (its own per-agent states), 8 observations -> 5 logits, observations
    normalised."""
    torch.manual_seed(2)
    parts = RecurrentAgent(8, gym.spaces.Discrete(5), hidden_size=4).policy_parts()
    stats = {"mean": [0.1] * 8, "var": [2.0] * 8, "epsilon": 1e-8, "clip": 10.0}
    return policy_dict(parts.pop("actor"), stats, RUNNER_KEYS, env="tag", source=SOURCE, where="test",
                       policy_name=name, **parts)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as the trainer writes it for tag: policy.json (the bundle) and policies/<name>.json."""
    folder = tmp_path_factory.mktemp("tag_run")
    assert write_policies_or_warn(folder, lambda: [chaser(), runner()]) == folder / "policy.json"
    return folder


# ---------------------------------------------------------------------------------------------- Python
def test_bundle_and_policy_files_round_trip(run_dir):
    bundle = read_policy(run_dir / "policy.json")
    assert (bundle["format"], bundle["version"], bundle["env"], bundle["source"]) == ("godot-ppo-policy", 3, "tag", SOURCE)
    assert bundle["policies"] == json.loads(json.dumps([chaser(), runner()]))
    for entry in bundle["policies"]:
        assert read_policy(run_dir / POLICIES_DIR / f"{entry['policy_name']}.json") == entry
    text = (run_dir / "policy.json").read_text()
    n_layers = sum(len(entry["layers"]) for entry in bundle["policies"])  # one line each, indented in its entry
    assert text == policy_json(bundle) and text.count("\n" + " " * 8 + '{"weight"') == n_layers == 5
    assert "policy_name" not in policy_dict(nn.Sequential(nn.Linear(6, 2)), None, CHASER_KEYS, env="tag", source={},
                                            where="test")


def test_policy_file_names_stay_in_their_folder():
    assert policy_file_names(["../../etc/passwd", "red team", "chaser"]) == {
        "../../etc/passwd": "_.._etc_passwd.json", "red team": "red_team.json", "chaser": "chaser.json"}


@pytest.mark.parametrize("names", [["é", "è"], ["ü", "ö", "ä"], ["a/b", "a_b"], ["..", "_"], ["Red", "red"],
                                   ["x" * 300 + "1", "x" * 300 + "2"]])
def test_policy_names_that_make_one_file_name_get_distinct_files(tmp_path, names):
    files = policy_file_names(names)
    assert len({f.casefold() for f in files.values()}) == len(names)  # distinct, on case-blind file systems too
    assert all(len(f) <= 80 and "/" not in f and not f.startswith(".") for f in files.values())
    assert policy_file_names(names) == files  # the same run writes the same files at every checkpoint
    assert write_policies(tmp_path, [chaser(name) for name in names]) == tmp_path / "policy.json"
    for name, file in files.items():
        assert read_policy(tmp_path / POLICIES_DIR / file)["policy_name"] == name
    assert [p["policy_name"] for p in read_policy(tmp_path / "policy.json")["policies"]] == names


@pytest.mark.parametrize("policies, expected", [
    ([], "non-empty list"),
    ([chaser(), chaser()], "two entries are named 'chaser'"),
    ([chaser(), dict(runner(), policy_name="")], "a policy name must be a non-empty string"),
    ([chaser(), {k: v for k, v in runner().items() if k != "policy_name"}], "non-empty string, got 'None'"),
    ([chaser(), chaser("runner", env="pong")], "'runner' was made for 'pong', not 'tag'"),
    ([chaser(), {"format": "x"}], "entry 1: not a policy"),
])
def test_bundle_refuses_bad_entries(policies, expected):
    with pytest.raises(PolicyFileError, match=expected):
        policy_bundle(policies, env="tag", source={})


def _bundle(**changes) -> dict:
    return dict(policy_bundle([chaser(), runner()], env="tag", source={}), **changes)


BAD_FILES = {
    "version 2 bundle": (_bundle(version=2), "a bundle of policies (\"policies\") needs version 3"),
    "version 6": (_bundle(version=6), "unknown version 6; this godot-ppo reads versions 1 to 5"),
    "empty": (_bundle(policies=[]), '"policies" must be a non-empty list'),
    "no name": (_bundle(policies=[chaser(), {**runner(), "policy_name": None}]), "entry 1 has no \"policy_name\""),
    "same name": (_bundle(policies=[chaser(), chaser()]), "two entries of the bundle are named 'chaser'"),
    "other game": (_bundle(policies=[chaser(), chaser("runner", env="pong")]), "policy 'runner': it was made for 'pong'"),
    "entry version": (_bundle(policies=[chaser(), {**runner(), "version": 9}]), "policy 'runner': unknown version 9"),
    "entry sizes": (_bundle(policies=[chaser(), {**runner(), "observation_size": 7}]),
                    "policy 'runner': every row of layer 0's weight must hold 7 numbers"),
    "nested": (_bundle(policies=[chaser(), {**_bundle(), "policy_name": "runner"}]), "policy 'runner': a bundle inside"),
    "name not a string": ({**chaser(), "policy_name": 3}, '"policy_name" must be a non-empty string, got \'3\''),
}


@pytest.mark.parametrize("case", BAD_FILES)
def test_read_policy_checks_bundles_entry_by_entry(tmp_path, case):
    content, expected = BAD_FILES[case]
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(content))
    with pytest.raises(PolicyFileError) as e:
        read_policy(path)
    assert str(e.value).startswith(f"policy file {path}: ") and expected in str(e.value) and "\n" not in str(e.value)


def test_write_policies_or_warn_never_raises(tmp_path, capsys):
    assert write_policies_or_warn(tmp_path, lambda: [chaser(), chaser()]) is None
    assert write_policies_or_warn(tmp_path, lambda: 1 / 0) is None
    assert not list(tmp_path.iterdir())
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("godot-ppo: warning: could not write the policy files") for line in err)


def test_onnx_export_of_a_bundle_names_each_policys_file(run_dir):
    with pytest.raises(PolicyFileError, match=f"export each policy's own file, e.g. godot-ppo export-policy "
                                              f"{run_dir}/policies/chaser.json --format onnx"):
        policy_export.export_onnx(run_dir / "policy.json")


# ---------------------------------------------------------------------------------------------- the engine
def _play(export, policy_arg: str, *extra, env="tag", agents=4):
    cmd = [str(export), f"--env={env}", f"--agents={agents}", f"--policy={policy_arg}", "--max_episode_steps=60",
           "--fixed-fps", "60", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def _eval_report(result) -> dict:
    lines = [line for line in result.stdout.splitlines() if line.startswith('{"eval"')]
    assert result.returncode == 0 and len(lines) == 1, result.stdout + result.stderr
    assert "SCRIPT ERROR" not in result.stderr, result.stderr
    return json.loads(lines[0])["eval"]


@pytest.mark.parametrize("files", [["policy.json"], ["policies/runner.json", "policies/chaser.json"]])
def test_tag_plays_each_agent_with_its_policy(headless_export, run_dir, files):
    policy_arg = ",".join(str(run_dir / f) for f in files)
    # the bundle, as `godot-ppo train`'s evaluation and `play RUN_DIR` give it; or the files, --policy=A,B
    report = in_engine.evaluate_in_engine(policy_arg, episodes=8, agents=4, max_episode_steps=60)
    assert report["policy"] == policy_arg and report["episodes"] == 8
    sides = report["by_policy"]
    assert sorted(sides) == ["chaser", "runner"] and sides["chaser"]["episodes"] == sides["runner"]["episodes"] == 4
    # one field's rewards sum to zero: the chaser's gain is the runner's loss (to_json's 6 digits)
    assert sides["chaser"]["mean_return"] == pytest.approx(-sides["runner"]["mean_return"], abs=1e-4)


def test_version_2_files_still_play_every_agent(headless_export, tmp_path):
    old = tmp_path / "v2.json"
    old.write_text(json.dumps(dict(json.loads(COMMITTED_POLICY.read_text()), version=2)))
    report = _eval_report(_play(headless_export, str(old), "--eval_episodes=2", env="ball_chase", agents=2))
    assert report["episodes"] == 2 and "by_policy" not in report


def _engine_errors(run_dir, tmp_path) -> dict:
    swapped = tmp_path / "swapped.json"  # the chaser's network under the runner's name
    swapped.write_text(policy_json(chaser("runner")))
    nameless = tmp_path / "nameless.json"  # a chaser network for every agent: it does not fit the runners
    nameless.write_text(policy_json({k: v for k, v in chaser().items() if k != "policy_name"}))
    goalie = tmp_path / "goalie.json"
    goalie.write_text(policy_json(chaser("goalie", env="tag")))
    c, r = run_dir / "policies/chaser.json", run_dir / "policies/runner.json"
    return {
        "missing": (f"{c}", ['agent 1 (', 'plays the policy "runner", but no policy file gives it',
                             f'{c} gives "chaser"', f"add its file, e.g. --policy={c},{r} "]),
        "twice": (f"{c},{run_dir / 'policy.json'}",
                  [f'two policy files give the policy "chaser", {c} and {run_dir / "policy.json"}']),
        "spaces": (f"{c},{swapped}", [f'policy file {swapped} (policy "runner"): it expects 6 observations, the agent '
                                      'gives 8', 'plays the policy "runner")']),
        "nameless": (f"{nameless}", ["it expects 6 observations, the agent gives 8"]),
        "unplayed": (f"{c},{r},{goalie}", [f'policy file {goalie} gives the policy "goalie", which no agent of "tag" '
                                         'plays (its agents play chaser, runner)']),
    }


@pytest.mark.parametrize("case", ["missing", "twice", "spaces", "nameless", "unplayed"])
def test_engine_refuses_policies_that_do_not_fit_in_one_line(headless_export, run_dir, tmp_path, case):
    policy_arg, expected = _engine_errors(run_dir, tmp_path)[case]
    result = _play(headless_export, policy_arg, "--eval_episodes=2")
    errors = [line for line in result.stderr.splitlines() if line.startswith("rl_sync: error: ")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr
    assert all(part in errors[0] for part in expected), errors[0]
    assert '"eval"' not in result.stdout


def test_policy_forward_runs_one_network_of_a_run(headless_export, run_dir):
    outputs, _ = in_engine.policy_forward(run_dir / "policies/chaser.json", [[0.0] * 6])
    assert outputs.shape == (1, 2)
    with pytest.raises(in_engine.PlaybackError, match=r"holds several policies \(a bundle\); give one policy's file"):
        in_engine.policy_forward(run_dir / "policy.json", [[0.0] * 6])


@pytest.mark.slow
def test_play_records_a_bundle(windowed_export, run_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    gif = tmp_path / "tag.gif"
    cmd = [sys.executable, "-m", "python_trainer", "play", str(run_dir / "policy.json"), "--agents", "2",
           "--record", str(gif), "--record-seconds", "1"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=90)
    assert result.returncode == 0 and gif.stat().st_size > 0, result.stdout + result.stderr
    assert wait_gone([xvfb_pid(result.stdout)], timeout=5) == []


TAG_INFO = {"env": "tag", "n_agents": 2, "agent_policy_names": ["chaser", "runner"],
            "observation_space": [{"obs": {"size": [6], "space": "box"}}, {"obs": {"size": [8], "space": "box"}}],
            "action_space": [{"move": {"size": 2, "action_type": "continuous"}},
                             {"move": {"size": 5, "action_type": "discrete"}}]}


def test_onnx_round_trip_keeps_the_policy_name(run_dir, tmp_path):
    import onnx

    from python_trainer.engine.onnx_import import import_policy
    from python_trainer.engine.onnx_policy import policy_to_onnx

    model = policy_export.export_onnx(run_dir / "policies/chaser.json", tmp_path / "chaser.onnx")
    assert import_policy(model)["policy_name"] == "chaser"  # from our export's metadata
    assert import_policy(model, TAG_INFO, policy_name="chaser")["action_keys"] == CHASER_KEYS  # the chaser's agents
    # `import-policy chaser.onnx --env-id tag`: the metadata names the policy, so it plays the chaser's agents
    imported = import_policy(model, TAG_INFO)
    assert (imported["policy_name"], imported["action_keys"]) == ("chaser", CHASER_KEYS)
    with pytest.raises(PolicyFileError) as e:  # the runner's agents see 8 observations: what the metadata says
        import_policy(model, TAG_INFO, policy_name="runner")
    assert str(e.value) == (f"{model}: the model takes 6 observations, but the policy 'runner' of tag takes 8: the "
                            "model is tag's policy 'chaser' (its metadata says): drop --policy-name, or give "
                            "--policy-name chaser")
    with pytest.raises(PolicyFileError, match="no agent of tag plays the policy 'goalie'; its agents play chaser, runner"):
        import_policy(model, TAG_INFO, policy_name="goalie")
    plain = tmp_path / "plain.onnx"  # a model without our metadata (SB3's, CleanRL's) for a game of several policies
    plain.write_bytes(policy_to_onnx({k: v for k, v in chaser().items() if k != "policy_name"}))
    onnx_model = onnx.load(str(plain))
    del onnx_model.metadata_props[:]
    onnx.save(onnx_model, str(plain))
    with pytest.raises(PolicyFileError) as e:
        import_policy(plain, TAG_INFO)
    assert str(e.value) == (f"{plain}: tag's agents play several policies (chaser, runner) and the model does not say "
                            "which one it is: name it with --policy-name")
    assert import_policy(plain, TAG_INFO, policy_name="chaser")["policy_name"] == "chaser"


def test_game_policy_checks_a_policy_against_its_own_agents():
    from python_trainer.agent import Agent
    from python_trainer.normalization import Normalizer

    agent = Agent(8, gym.spaces.Discrete(5))
    normalizer = Normalizer(8, 1, 0.99, norm_obs=True, norm_reward=False)
    policy = game_policy(agent, normalizer, gym.spaces.Discrete(5), TAG_INFO, env_id="tag", source={}, where="runner",
                         policy_name="runner")
    assert (policy["policy_name"], policy["observation_size"], policy["action_keys"]) == ("runner", 8, RUNNER_KEYS)
    with pytest.raises(PolicyFileError, match="the actor takes 8 observations, but tag gives 6"):
        game_policy(agent, normalizer, gym.spaces.Discrete(5), TAG_INFO, env_id="tag", source={}, where="runner",
                    policy_name="chaser")


@pytest.mark.parametrize("mode", ["--policy=random --eval_episodes=2", "--benchmark_steps=200", "--quit_after_frames=200"])
def test_tag_runs_without_script_errors_in_each_local_mode(headless_export, mode):
    result = subprocess.run([str(headless_export), "--env=tag", "--agents=4", *mode.split(), "--fixed-fps", "60"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and '{"' in result.stdout, result.stdout + result.stderr
    assert "SCRIPT ERROR" not in result.stdout + result.stderr, result.stderr


def _stderr_line(proc, needle: str, timeout: float):
    """The next stderr line of ``proc`` holding ``needle`` within ``timeout`` seconds, else None."""
    import selectors
    import time

    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(timeout=deadline - time.monotonic()):
                line = proc.stderr.readline()
                if not line:
                    return None
                if needle in line:
                    return line
    return None


def test_policy_reload_reloads_a_bundle_and_keeps_it_whole(headless_export, tmp_path):
    """`train --watch`'s window: RUN_DIR/policy.json rewritten at each checkpoint reloads both policies; a version
    without the runner's policy is refused and the previous bundle plays on."""
    write_policies(tmp_path, [chaser(), runner()])
    cmd = [str(headless_export), "--env=tag", "--agents=2", f"--policy={tmp_path / 'policy.json'}", "--policy_reload",
           "--max_fps=30"]  # real time: the reloader looks at the file 4 times a second
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
    try:
        # A version written before the game read the first is simply its first: write until one is reloaded.
        reloaded, step = None, 1
        while reloaded is None and step < 40:
            step += 1
            write_policies(tmp_path, [dict(chaser(), source={"global_step": step}), runner()])  # the bundle's step
            reloaded = _stderr_line(proc, "rl_sync: policy reloaded", 0.5)
        assert reloaded and 2 <= int(reloaded.split("global step ")[1].split(",")[0]) <= step, (step, reloaded)
        (tmp_path / "policy.json").write_text(policy_json(policy_bundle([chaser()], env="tag", source={})))
        refused = _stderr_line(proc, "policy not reloaded", 10)
        assert refused and 'plays the policy "runner", but no policy file gives it' in refused, refused
        assert proc.poll() is None  # the previous bundle plays on
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_checkpoint_of_several_policies_exports_as_a_bundle(tmp_path):
    """export-policy RUN (and `play RUN` when its policy.json is older than the checkpoint): the trainer's checkpoint
    of several policies holds each one's model, normaliser and spaces under "policies"."""
    from python_trainer.agent import Agent
    from python_trainer.checkpoint import save_checkpoint
    from python_trainer.normalization import Normalizer
    from python_trainer.run.train import Args

    spaces = {"chaser": (6, gym.spaces.Box(-1.0, 1.0, (2,))), "runner": (8, gym.spaces.Discrete(5))}
    parts, expected = {}, {}
    for name, (n_obs, space) in spaces.items():
        agent, normalizer = Agent(n_obs, space), Normalizer(n_obs, 1, 0.99, norm_obs=True, norm_reward=False)
        save_checkpoint(tmp_path / f"{name}.pt", agent=agent, optimizer=torch.optim.Adam(agent.parameters()),
                        normalizer=normalizer, args=Args(env_id="tag"), global_step=512, update=2,
                        observation_space=gym.spaces.Box(-np.inf, np.inf, (n_obs,)), action_space=space)
        parts[name] = torch.load(tmp_path / f"{name}.pt", weights_only=True)
        expected[name] = game_policy(agent, normalizer, space, TAG_INFO, env_id="tag", source={}, where=name,
                                     policy_name=name)
    keys = ("model", "optimizer", "normalizer", "observation_space", "action_space")
    both = {**parts["chaser"], **{key: None for key in keys}, "env_info": TAG_INFO,
            "policies": {name: {key: ckpt[key] for key in keys} for name, ckpt in parts.items()}}
    torch.save(both, tmp_path / "model.pt")
    bundle = policy_export.checkpoint_policy(tmp_path / "model.pt")
    assert [entry["policy_name"] for entry in bundle["policies"]] == ["chaser", "runner"]
    for entry in bundle["policies"]:
        assert {k: v for k, v in entry.items() if k != "source"} == {
            k: v for k, v in expected[entry["policy_name"]].items() if k != "source"}
        assert entry["source"]["global_step"] == 512 == bundle["source"]["global_step"]
