extends Node
# RLSync: drives every agent controller of a scene from a trainer, a policy file, or the keyboard.
#
# Add one RLSync node to a game scene. When that scene is the first of a run, the node also answers
# --list_envs and --env (see game_registry.gd). Its mode comes from the command line:
#   --port=P               train: connect to a trainer on 127.0.0.1:P and speak godot-rl's protocol
#   --policy=FILE[,FILE]   every agent is driven by a trained policy run in the engine (no trainer),
#                          the network of its policy_name (policy_set.gd);
#                          with --eval_episodes=N it plays N episodes, prints their returns as JSON, quits;
#                          --policy=random: random actions (any game's baseline);
#                          with --opponent, matches of team 0 against team 1 (match_mode.gd)
#   --benchmark_steps=N    random actions inside the engine for N decision steps, print the rate, quit
#   (none of these)        human play: every agent takes the keyboard action of its controller
# This node owns the run: it starts it in its mode, drives each physics frame and stops it. Its
# helpers: run_flags.gd (the flags), decision_step.gd (the episode bookkeeping), run_clock.gd
# (--quit_after_*), window_helpers.gd (overlay, recording), and one per mode: trainer_session.gd (the
# trainer's conversation in godot-rl's wire protocol, see "The wire protocol" in this folder's
# README.md), policy_mode.gd and benchmark_mode.gd.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const AgentController = preload("res://addons/rl_sync/agent_controller.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const TrainerSession = preload("res://addons/rl_sync/trainer_session.gd")
const PolicyMode = preload("res://addons/rl_sync/policy_mode.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")
const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")
const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")
const RunFlags = preload("res://addons/rl_sync/run_flags.gd")
const RunClock = preload("res://addons/rl_sync/run_clock.gd")
const WindowHelpers = preload("res://addons/rl_sync/window_helpers.gd")
const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const EnvParams = preload("res://addons/rl_sync/env_params.gd")

const BASE_PHYSICS_FPS := 60

enum Mode { HUMAN, TRAIN, BENCHMARK, POLICY }

# The game's name, sent to the trainer and checked against policy files. Empty: the scene file's
# base name. A game picked through the project's registry (rl_sync/games) takes its name there.
export var env_name := ""
# Physics frames per decision step that this game is made for, in every run of it (a trainer's, a
# policy's in the engine, a person's): --action_repeat multiplies it. A game whose agents would decide
# too often for their credit to reach far enough sets it in its scene (pong: 3, 20 decisions a second).
export var frames_per_decision := 1

var mode: int = Mode.HUMAN
var agents := []
var action_spaces := []
var action_repeat := 1
var stopping := false
# The game's environment parameters (env_params.gd): declared, set by --env_param or the trainer.
# Until the run starts (or in a test that sets `agents` itself): no parameters, no agents.
var env_params: EnvParams = EnvParams.new({}, 0, 0)

var _frame := 0
# Local modes (policy, benchmark, human) choose their first actions on the first physics frame, before
# anything was simulated: that decision step counts no step and collects no reward (a trainer's first
# action follows its reset, and its first decision step comes after that action's physics).
var _before_first_step := false
# The helper of the mode, when it has one (see _start).
var _session: TrainerSession = null
var _policy_mode: PolicyMode = null
var _benchmark: BenchmarkMode = null
var _overlay = null
var _clock: RunClock = null
# --record_demos: records one agent's episodes, whatever drives it (null otherwise).
var _demos: DemoRecorder = null


func _ready() -> void:
	# Run before every agent in the physics frame: the action chosen now moves the agents this frame.
	process_priority = -1000
	set_physics_process(false)
	set_process(false)
	if env_name == "":
		env_name = _scene_file_name()
	# When this scene is the first of the run (not one the game selector or another scene picked),
	# it answers --list_envs and --env; it starts nothing when the run goes to another scene or quits.
	if GameRegistry.chosen_game() == "" and _in_current_scene():
		if not GameRegistry.claim_run(get_tree(), {env_name: get_tree().current_scene.filename}):
			return
	if GameRegistry.chosen_game() != "":
		env_name = GameRegistry.chosen_game()
	# The game builds its agents in its own _ready, which runs after ours (children first).
	call_deferred("_start")


# A node added to a tree without a current scene (a test runner) never chooses games.
func _in_current_scene() -> bool:
	var scene := get_tree().current_scene
	return scene != null and (scene == self or scene.is_a_parent_of(self))


func _scene_file_name() -> String:
	var scene := get_tree().current_scene
	return scene.filename.get_file().get_basename() if scene != null else ""


func _start() -> void:
	if RlArgs.has_failed():
		return
	var flags := RunFlags.new()
	if not flags.read(get_tree()):
		return
	action_repeat = flags.action_repeat * frames_per_decision
	Engine.target_fps = flags.max_fps  # --max_fps: a frame cap (0: none), e.g. a window watched during training
	# Game time per physics step stays 1/60 s whatever the speedup, so physics is the same at any
	# speed; with the engine's --fixed-fps flag, frames also stop waiting for the wall clock.
	Engine.time_scale = flags.speedup
	Engine.iterations_per_second = int(round(BASE_PHYSICS_FPS * flags.speedup))
	agents = _find_agents()
	if agents.empty():
		RlArgs.fail(get_tree(), "no agent controllers found: add nodes extending agent_controller.gd to the scene")
		return
	var params_error := _start_env_params(flags.env_seed)
	if params_error != "":
		RlArgs.fail(get_tree(), params_error)
		return
	for agent in agents:
		if flags.max_episode_steps > 0:
			agent.max_episode_steps = flags.max_episode_steps
		action_spaces.append(agent.get_action_space())
		agent.begin_episode()
	if not _start_mode(flags):
		return
	if RlArgs.has("record_demos") and not _start_recording():
		return
	if not RlArgs.is_headless():
		_overlay = WindowHelpers.add_to(self, flags.record_every)
	_clock = RunClock.new(flags.quit_after_frames, flags.quit_after_seconds)
	_before_first_step = mode != Mode.TRAIN
	set_physics_process(true)
	set_process(_clock.is_limited())


# Collects the parameters the game declares, hands them to every agent (before its first episode) and
# applies --env_param; "" or what is wrong.
func _start_env_params(seed_value: int) -> String:
	var root: Node = get_tree().current_scene if _in_current_scene() else get_parent()
	var declared = EnvParams.declared_in(root)
	if typeof(declared) == TYPE_STRING:
		return declared
	env_params = EnvParams.new(declared, agents.size(), seed_value)
	for i in range(agents.size()):
		agents[i].use_env_params(env_params, i)
	return env_params.apply_flags()


# Picks the mode from the flags and starts its helper; false when that ended the run (an error, no
# trainer, or a --policy_forward that is done).
func _start_mode(flags: RunFlags) -> bool:
	if flags.port > 0:
		mode = Mode.TRAIN
		# Training renders as fast as it simulates; waiting for vsync would cap it at 60 steps/s.
		OS.vsync_enabled = false
		_session = TrainerSession.new(self)
		var ended := _session.connect_to_trainer(flags.port, flags.connect_timeout, RunFlags.token())
		if ended != "":
			_end_session(ended)
			return false
	elif RlArgs.get_string("policy", "") != "":
		mode = Mode.POLICY
		_policy_mode = PolicyMode.new(self, flags.env_seed)
		var error := _policy_mode.start(flags.eval_episodes)
		if error == PolicyMode.PRINTED:
			_stop(0)
			return false
		if error != "":
			_fail(error)
			return false
	elif RlArgs.has("opponent"):
		_fail("--opponent=%s plays against a policy: add --policy=FILE, random or scripted" % RlArgs.get_string("opponent"))
		return false
	elif flags.benchmark_steps > 0:
		mode = Mode.BENCHMARK
		_benchmark = BenchmarkMode.new(self, flags.benchmark_steps, flags.env_seed)
	return true


# --record_demos: only a local driver (the keyboard, --policy) makes demonstrations; false when it failed.
func _start_recording() -> bool:
	if mode == Mode.TRAIN or mode == Mode.BENCHMARK:
		_fail("--record_demos records the keyboard or a --policy: drop --port / --benchmark_steps")
		return false
	_demos = DemoRecorder.new()
	var error := _demos.start(env_name, agents, action_spaces)
	if error != "":
		_demos = null
		_fail(error)
		return false
	print("rl_sync: " + _demos.summary() + " in " + _demos.path)
	return true


# Ends a run of --quit_after_frames frames or --quit_after_seconds with a report of the rates it held.
func _process(_delta: float) -> void:
	if stopping or not _clock.is_over():
		return
	print(to_json(_clock.report(_mode_text(), agents.size(), _frame)))
	_stop(0)


func _find_agents() -> Array:
	var found := []
	for node in get_tree().get_nodes_in_group(AgentController.AGENT_GROUP):
		if node is AgentController:
			found.append(node)
	return found


func _physics_process(_delta: float) -> void:
	if stopping:
		return
	_frame += 1
	# An action holds for action_repeat physics frames; decisions happen on the first of them.
	if (_frame - 1) % action_repeat != 0:
		return
	match mode:
		Mode.TRAIN:
			var ended: String = _session.step()
			if ended != "":
				_end_session(ended)
		Mode.BENCHMARK:
			if _benchmark.step():
				_stop(0)
		Mode.POLICY:
			if _policy_mode.step():
				_stop(0)
		Mode.HUMAN:
			decision_step()
			for i in range(agents.size()):
				act(i, agents[i].get_heuristic_action())
	if _demos != null and not stopping:
		_record_demos_after_step()


# Gives agent i its action (every local driver goes through here, so --record_demos sees it).
func act(i: int, action: Dictionary) -> void:
	agents[i].set_action(action)
	if _demos != null:
		_demos.on_action(i, action)


func _record_demos_after_step() -> void:
	var error := _demos.poll_drop_key()
	if error != "":
		_fail(error)
	elif _demos.is_done():
		print("rl_sync: recorded %d episodes in %s" % [_demos.recorded_here, _demos.path])
		_stop(0)


# One decision step for every agent (decision_step.gd): collect the reward earned since the last one,
# apply the time limit, and start a new episode at once for agents whose episode ended, keeping the
# last observation of the ended episode in that agent's info as "terminal_observation".
func decision_step() -> Dictionary:
	if _before_first_step:
		_before_first_step = false
		var first := DecisionStep.first(agents)
		if _demos != null:
			_demos.on_step(first, true)
		return first
	var step := DecisionStep.json(agents)
	if _demos != null:
		var error := _demos.on_step(step, false)
		if error != "":
			_fail(error)
	if _overlay != null:
		_overlay.show_agents(_mode_text(), agents)
	return step


# decision_step() for the binary step exchange: the same bookkeeping, its results packed as Wire's
# step reply wants them ([values, infos], see DecisionStep.packed(); with the declared observation
# sizes, a String when an agent's observation no longer has its size).
func decision_step_packed(declared: PoolIntArray = PoolIntArray(), declared_total: int = 0):
	var step = DecisionStep.packed(agents, declared, declared_total)
	if _overlay != null and typeof(step) == TYPE_ARRAY:
		_overlay.show_agents(_mode_text(), agents)
	return step


func _mode_text() -> String:
	if _demos != null:
		return _driver_text() + "\n" + _demos.summary()
	return _driver_text()


func _driver_text() -> String:
	match mode:
		Mode.TRAIN:
			return "training (%s)" % env_name
		Mode.POLICY:
			return "policy: %s" % _policy_mode.file_names()
		Mode.BENCHMARK:
			return "benchmark: random actions"
	return "human play: arrow keys or WASD"


# Reports how a trainer's session ended (TrainerSession.step() and connect_to_trainer()).
func _end_session(ended: String) -> void:
	if ended == TrainerSession.CLOSED:
		print("rl_sync: " + ended)
		_stop(0)
	elif ended == Wire.DISCONNECTED:
		if not stopping:
			printerr("rl_sync: error: " + Wire.DISCONNECTED)
			_stop(1)
	else:
		_fail(ended)


func _fail(message: String) -> void:
	RlArgs.fail(get_tree(), message)
	_stop(1)


func _stop(exit_code: int) -> void:
	if stopping:
		return
	stopping = true
	set_physics_process(false)
	set_process(false)
	if _session != null:
		_session.close()
	get_tree().quit(exit_code)
