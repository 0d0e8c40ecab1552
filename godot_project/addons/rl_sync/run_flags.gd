extends Reference
# The command-line flags RLSync (sync.gd) runs by (see "Command-line flags" in this folder's
# README.md), read and checked once, when it starts, and the engine's speed they set. A bad number
# fails the run through RlArgs.fail (one line on stderr, exit code 1): read() then returns false.

const Contract = preload("res://addons/rl_sync/contract.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

# Where our launcher puts the hello token (see token()).
const TOKEN_VARIABLE := "RL_SYNC_TOKEN"
# A game run from its project folder with no mode flag (the editor's Play) looks for a trainer on
# this port once (`godot-ppo train --editor`): godot-rl's default, or the variable, or the setting.
const DEFAULT_EDITOR_PORT := Contract.EDITOR_PORT
const EDITOR_PORT_VARIABLE := "RL_SYNC_EDITOR_PORT"
const EDITOR_PORT_SETTING := "rl_sync/editor_port"
# How long that look may hold up the game's start when a trainer is there but slow to answer.
const EDITOR_CONNECT_S := 0.5
const DEFAULT_CONNECT_TIMEOUT_S := Contract.CONNECT_TIMEOUT_S
# Physics steps per second of game time, at any --speedup.
const BASE_PHYSICS_FPS := 60

# Untyped: RlArgs returns null for a bad value, and read() reads every flag before it says so.
var env_seed = 0
var action_repeat = 1
var max_episode_steps = 0
var speedup = 1.0
var port = 0
var connect_timeout = DEFAULT_CONNECT_TIMEOUT_S
var benchmark_steps = 0
var eval_episodes = 0
var quit_after_frames = 0
var quit_after_seconds = 0.0
var record_every = 4
var max_fps = 0


# Reads the numbers (in this order: the first bad one is the one reported); false when one is bad.
func read(tree: SceneTree) -> bool:
	RlArgs.warn_unknown_flags()  # a misspelt flag of ours, said once at start
	env_seed = RlArgs.get_int(tree, "env_seed", 0, 0)
	action_repeat = RlArgs.get_int(tree, "action_repeat", 1, 1)
	max_episode_steps = RlArgs.get_int(tree, "max_episode_steps", 0, 1)
	speedup = RlArgs.get_positive_float(tree, "speedup", 1.0)
	port = RlArgs.get_int(tree, "port", 0, 1, 65535)
	connect_timeout = RlArgs.get_positive_float(tree, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
	benchmark_steps = RlArgs.get_int(tree, "benchmark_steps", 0, 1)
	eval_episodes = RlArgs.get_int(tree, "eval_episodes", 0, 1)
	quit_after_frames = RlArgs.get_int(tree, "quit_after_frames", 0, 1)
	quit_after_seconds = RlArgs.get_positive_float(tree, "quit_after_seconds", 0.0)
	record_every = RlArgs.get_int(tree, "record_every", 4, 1)
	max_fps = RlArgs.get_int(tree, "max_fps", 0, 1)
	_check_file_list(tree, "policy", RlArgs.get_string("policy", ""))
	_check_file_list(tree, "opponent", RlArgs.get_string("opponent", ""))
	return not RlArgs.has_failed()


# --policy=a.json,b.json and --opponent take files separated by commas: an empty name among them (a
# trailing or a doubled comma) is a typo, not a file to leave out.
static func _check_file_list(tree: SceneTree, key: String, text: String) -> void:
	if text.find(",") == -1:
		return
	for part in text.split(","):
		if part.strip_edges() == "":
			RlArgs.fail(tree, "--%s=%s has an empty file name among its commas: give --%s=FILE[,FILE...] with no empty one" % [
					key, text, key])
			return


# --max_fps and --speedup, applied to the engine once the flags are read.
func apply_speed() -> void:
	Engine.target_fps = max_fps  # a frame cap (0: none), e.g. a window watched during training
	# Game time per physics step stays 1/60 s whatever the speedup, so physics is the same at any
	# speed; with the engine's --fixed-fps flag, frames also stop waiting for the wall clock.
	Engine.time_scale = speedup
	Engine.iterations_per_second = int(round(BASE_PHYSICS_FPS * speedup))


# The trainer's secret for our hello. Our launcher passes it in the environment, which only the same user can
# read (a command line is visible to every local user); --token=T still works for other trainers.
static func token() -> String:
	var value := OS.get_environment(TOKEN_VARIABLE)
	return value if value != "" else RlArgs.get_string("token", "")


# Whether the game runs from its project folder (the editor's Play, or `godot3-runner --path DIR`),
# not from an export, whose .pck holds project.godot as project.binary. (OS.has_feature("standalone")
# cannot tell: it is true of every build without the editor, `godot3-runner --path DIR` too.)
static func from_project_folder() -> bool:
	return File.new().file_exists("res://project.godot")


# The port of the editor's trainer: $RL_SYNC_EDITOR_PORT, else the project setting, else godot-rl's
# default; 0 for a value that is not a port (the caller says so).
static func editor_port() -> int:
	var text := OS.get_environment(EDITOR_PORT_VARIABLE)
	if text == "" and ProjectSettings.has_setting(EDITOR_PORT_SETTING):
		text = str(ProjectSettings.get_setting(EDITOR_PORT_SETTING))
	if text == "":
		return DEFAULT_EDITOR_PORT
	return int(text) if text.is_valid_integer() and int(text) >= 1 and int(text) <= 65535 else 0
