"""The real check of issue 15: a game built on godot_rl_agents' own Godot 3 plugin trains and profiles with godot-ppo.

    git clone -b godot3 https://github.com/edbeeching/godot_rl_agents_plugin /tmp/plugin   # (commit 5b6e1bf)
    python scripts/check_godot_rl_plugin.py --plugin /tmp/plugin [--work /tmp/plugin_check] [--timesteps 150000]

It copies the plugin's `addons/godot_rl_agents` folder from that checkout (nothing of it is kept in this repository)
into a fresh project in --work, next to a tiny game of ours made the plugin's way: eight agents, each in the square
[-1, 1]^2, move (a continuous 2-vector) towards a random target; reward = 10 x the distance gained each frame, +10 on
reaching it (the episode ends, done), and done at the AIController's time limit (reset_after = 200 frames); each
player resets itself on the frame after (the plugin's pattern). Then, as a user would, it runs

    godot-ppo export --project WORK/plugin_reach --out WORK/plugin_reach/exports
    godot-ppo envs --env-path EXPORT
    godot-ppo train --env-path EXPORT --num-instances 2 --total-timesteps N --seed 1
    godot-ppo profile --env-path EXPORT --modes headless,windowed --num-instances 1,2 --seconds 5

and measures a random policy's mean return on the same export for comparison. It prints the figures and exits 1 when
the trained deterministic policy does not beat random play by at least half the gap to the best return (about 20).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
ADDON = Path("addons/godot_rl_agents")

PROJECT = """; A tiny game on godot_rl_agents' own Godot 3 plugin, to check godot-ppo against it.
config_version=4

_global_script_classes=[ {
"base": "Node",
"class": "AIController",
"language": "GDScript",
"path": "res://addons/godot_rl_agents/controller/ai_controller.gd"
}, {
"base": "AIController",
"class": "AIController2D",
"language": "GDScript",
"path": "res://addons/godot_rl_agents/controller/ai_controller_2d.gd"
} ]
_global_script_class_icons={
"AIController": "",
"AIController2D": ""
}

[application]

config/name="PluginReach"
run/main_scene="res://main.tscn"

[editor_plugins]

enabled=PoolStringArray( "res://addons/godot_rl_agents/plugin.cfg" )
"""

CONTROLLER = """extends AIController2D
# The agent's side: what it sees, what it may do, what it earns.

var move := Vector2.ZERO


func get_obs() -> Dictionary:
	var to_target: Vector2 = _player.target - _player.pos
	return {"obs": [to_target.x, to_target.y, _player.pos.x, _player.pos.y]}


func get_reward() -> float:
	return reward


func get_action_space() -> Dictionary:
	return {"move": {"size": 2, "action_type": "continuous"}}


func set_action(action) -> void:
	move = Vector2(clamp(action["move"][0], -1.0, 1.0), clamp(action["move"][1], -1.0, 1.0))
"""

PLAYER = """extends Node2D
# Reach a random target in the square [-1, 1]^2; the episode ends there, or after reset_after frames.

const SPEED := 0.05
const REACH := 0.1

var pos := Vector2.ZERO
var target := Vector2.ZERO
onready var ai = $AIController2D


func _ready():
	ai.init(self)
	_new_episode()


func _new_episode():
	pos = Vector2(rand_range(-1, 1), rand_range(-1, 1))
	target = Vector2(rand_range(-1, 1), rand_range(-1, 1))


func _physics_process(_delta):
	if ai.needs_reset:
		ai.reset()
		_new_episode()
		return
	var before := pos.distance_to(target)
	pos += ai.move * SPEED
	pos.x = clamp(pos.x, -1.0, 1.0)
	pos.y = clamp(pos.y, -1.0, 1.0)
	var after := pos.distance_to(target)
	ai.reward += (before - after) * 10.0
	if after < REACH:
		ai.reward += 10.0
		ai.done = true
		ai.needs_reset = true
	elif ai.n_steps >= ai.reset_after:
		ai.done = true  # the time limit: the plugin reports it as done too
		ai.needs_reset = true
	position = pos * 100.0
"""

PLAYER_SCENE = """[gd_scene load_steps=3 format=2]

[ext_resource path="res://player.gd" type="Script" id=1]
[ext_resource path="res://reach_controller.gd" type="Script" id=2]

[node name="Player" type="Node2D"]
script = ExtResource( 1 )

[node name="AIController2D" type="Node" parent="."]
script = ExtResource( 2 )
reset_after = 200
"""


def main_scene(agents: int = 8) -> str:
    head = """[gd_scene load_steps=3 format=2]

[ext_resource path="res://addons/godot_rl_agents/sync.gd" type="Script" id=1]
[ext_resource path="res://player.tscn" type="PackedScene" id=2]

[node name="Main" type="Node2D"]

[node name="Sync" type="Node" parent="."]
script = ExtResource( 1 )
"""
    return head + "".join(f'\n[node name="Player{i}" parent="." instance=ExtResource( 2 )]\n' for i in range(agents))


def build(plugin: Path, project: Path) -> None:
    if not (plugin / ADDON / "sync.gd").is_file():
        sys.exit(f"--plugin {plugin}: no {ADDON}/sync.gd in it (a checkout of godot_rl_agents_plugin's godot3 branch)")
    if project.exists():
        shutil.rmtree(project)
    shutil.copytree(plugin / ADDON, project / ADDON)
    for name, text in {"project.godot": PROJECT, "reach_controller.gd": CONTROLLER, "player.gd": PLAYER,
                       "player.tscn": PLAYER_SCENE, "main.tscn": main_scene()}.items():
        (project / name).write_text(text)


def godot_ppo(*args: str, capture: bool = True) -> str:
    cmd = [sys.executable, "-m", "python_trainer", *args]
    print("$ godot-ppo " + " ".join(args), flush=True)
    result = subprocess.run(cmd, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3600)
    print(result.stdout if capture else "", end="", flush=True)
    if result.returncode != 0:
        sys.exit(f"godot-ppo {args[0]} failed (exit {result.returncode})")
    return result.stdout


def random_return(export: Path, episodes: int = 400) -> float:
    """A uniformly random policy's mean episode return on the export (the same --action_repeat 1 as training)."""
    sys.path.insert(0, str(REPO))
    from python_trainer.envs.vec_env import make_vec_env

    env = make_vec_env(env_path=export, num_instances=1, seed=123)
    returns: list[float] = []
    try:
        env.reset(seed=123)
        while len(returns) < episodes:
            _, _, _, _, infos = env.step(env.action_space.sample())
            if "_episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
    finally:
        env.close()
    return float(np.mean(returns))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plugin", required=True, type=Path, help="a checkout of godot_rl_agents_plugin (godot3)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/plugin_check"), help="where the game and runs go")
    parser.add_argument("--timesteps", type=int, default=150_000)
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    project, work = args.work / "plugin_reach", args.work
    build(args.plugin.resolve(), project)
    godot_ppo("export", "--project", str(project), "--out", str(project / "exports"))
    export = project / "exports" / "headless" / "pluginreach.x86_64"
    godot_ppo("envs", "--env-path", str(export))
    random_mean = random_return(export)
    print(f"random policy: mean return {random_mean:.2f}", flush=True)
    out = godot_ppo("train", "--env-path", str(export), "--num-instances", "2", "--total-timesteps",
                    str(args.timesteps), "--seed", "1", "--run-dir-root", str(work / "runs"))
    last = re.findall(r"global_step=(\d+) SPS=(\d+) mean_return\(last 100\)=([-\d.]+)", out)
    evaluated = re.search(r"eval: deterministic policy, \d+ episodes: mean return ([-\d.]+)", out)
    run_dir = Path(re.search(r"run folder: (\S+)", out).group(1))
    settings = json.loads((run_dir / "args.json").read_text()).get("game_settings")
    profile = None
    if not args.no_profile:
        godot_ppo("profile", "--env-path", str(export), "--modes", "headless,windowed", "--num-instances", "1,2",
                  "--seconds", "5", "--out", str(work / "profile"), capture=False)
        profile = json.loads((work / "profile" / "profile.json").read_text())["results"]
    print("\n== figures ==")
    print(f"game settings (args.json): {settings}")
    print(f"random policy mean return: {random_mean:.2f}")
    if last:
        print(f"training: {last[-1][0]} steps, last SPS {last[-1][1]}, mean return (last 100 episodes) {last[-1][2]}")
    trained = float(evaluated.group(1)) if evaluated else float(last[-1][2])
    print(f"trained deterministic policy mean return: {trained:.2f}")
    for r in profile or []:
        if r["status"] == "ok":
            print(f"profile {r['key']}: {r['agent_steps_per_second']:,.0f} agent-steps/s synced"
                  + (f", {r['pipelined_agent_steps_per_second']:,.0f} pipelined"
                     if r.get("pipelined_agent_steps_per_second") else ""))
        else:
            print(f"profile {r['key']}: {r['status']} {r.get('error', '')}")
    best = 20.0  # about: 10 for reaching the target plus 10 x the start distance (~1 on average)
    ok = trained >= random_mean + 0.5 * (best - random_mean)
    print("clearly better than random" if ok else "NOT clearly better than random")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
