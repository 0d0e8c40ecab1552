extends Node
# RLSync: drives every agent controller of a scene from a trainer, a policy file, or the keyboard.
#
# Add one RLSync node to a game scene. When that scene is the first of a run, the node also answers --list_envs and --env
# (see game_registry.gd). Its mode comes from the command line (run_mode.gd): --port=P trains with a trainer on
# 127.0.0.1:P in godot-rl's protocol, --policy=FILE runs trained networks in the engine, --benchmark_steps=N random
# actions; without them a person plays. This node owns the run: it starts it in its mode, drives each physics frame and
# stops it. Its helpers: run_flags.gd (the flags), run_mode.gd (the mode and its helper: trainer_session.gd, the trainer's
# conversation in godot-rl's wire protocol, see "The wire protocol" in this folder's README.md; policy_mode.gd;
# benchmark_mode.gd), decision_step.gd (the episode bookkeeping), run_clock.gd (--quit_after_*), window_helpers.gd
# (overlay, recording), demo_recorder.gd and scene_copies.gd (--copies).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const AgentController = preload("res://addons/rl_sync/agent_controller.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")
const RunMode = preload("res://addons/rl_sync/run_mode.gd")
const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")
const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")
const RunFlags = preload("res://addons/rl_sync/run_flags.gd")
const RunClock = preload("res://addons/rl_sync/run_clock.gd")
const WindowHelpers = preload("res://addons/rl_sync/window_helpers.gd")
const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const DemoHooks = preload("res://addons/rl_sync/demo_hooks.gd")
const EnvParams = preload("res://addons/rl_sync/env_params.gd")
const StepOrder = preload("res://addons/rl_sync/step_order.gd")
const SceneCopies = preload("res://addons/rl_sync/scene_copies.gd")

# The game's name, sent to the trainer and checked against policy files. Empty: the scene file's
# base name. A game picked through the project's registry (rl_sync/games) takes its name there.
export var env_name := ""
# Physics frames per decision step that this game is made for, in every run of it (a trainer's, a
# policy's in the engine, a person's): --action_repeat multiplies it. A game whose agents would decide
# too often for their credit to reach far enough sets it in its scene (pong: 3, 20 decisions a second).
export var frames_per_decision := 1

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
# The run's mode and its helper (null until the run starts).
var _run: RunMode = null
var _overlay = null
var _clock: RunClock = null
# --record_demos: records one agent's episodes, whatever drives it (null otherwise; demo_hooks.gd).
var _demos: DemoRecorder = null
var order := StepOrder.new()  # a step that ends an episode (or a reset seen by cameras) waits a frame or two


func _ready() -> void:
	# Run before every agent in the physics frame: the action chosen now moves the agents this frame.
	process_priority = -1000
	pause_mode = PAUSE_MODE_PROCESS  # and while the tree is paused for a reset (step_order.gd)
	set_physics_process(false)
	set_process(false)
	if env_name == "" and get_tree().current_scene != null:
		env_name = get_tree().current_scene.filename.get_file().get_basename()
	# When this scene is the first of the run (not one the game selector or another scene picked),
	# it answers --list_envs and --env; it starts nothing when the run goes to another scene or quits.
	if GameRegistry.chosen_game() == "" and _in_current_scene():
		if not GameRegistry.claim_run(get_tree(), {env_name: get_tree().current_scene.filename}):
			return
	if GameRegistry.chosen_game() != "":
		env_name = GameRegistry.chosen_game()
	# The game builds its agents in its own _ready, after ours, and may add sensors with call_deferred: start after.
	call_deferred("call_deferred", "_start")


# A node added to a tree without a current scene (a test runner) never chooses games.
func _in_current_scene() -> bool:
	var scene := get_tree().current_scene
	return scene != null and (scene == self or scene.is_a_parent_of(self))


func _start() -> void:  # a script error stopping the start (then it returns null) must not leave the game idling
	if _start_run() == null and not stopping:
		_fail("a script error stopped the run's start (the first SCRIPT ERROR above): fix the script and line it names")


func _start_run() -> bool:
	if RlArgs.has_failed() or SceneCopies.take_over(self):  # --copies=N: builds them, starts again
		return true
	var flags := RunFlags.new()
	if not flags.read(get_tree()):
		return true
	action_repeat = flags.action_repeat * frames_per_decision
	flags.apply_speed()
	agents = _find_agents()
	if agents.empty():
		RlArgs.fail(get_tree(), "no agent controllers found: add nodes extending agent_controller.gd to the scene")
		return true
	var params_error := _start_env_params(flags.env_seed)
	if params_error != "":
		RlArgs.fail(get_tree(), params_error)
		return true
	for agent in agents:
		if flags.max_episode_steps > 0:
			agent.max_episode_steps = flags.max_episode_steps
		action_spaces.append(agent.get_action_space())
		agent.begin_episode()
	_run = RunMode.new(self)
	var started: Reference = _run.start(flags)
	if not started.goes_on():
		_end(started)
		return true
	if RlArgs.has("record_demos"):
		var demos: Reference = DemoHooks.start(_run.mode, env_name, agents, action_spaces)
		if demos.is_failure():
			_fail(demos.message)
			return true
		_demos = demos.value
	if not RlArgs.is_headless():
		_overlay = WindowHelpers.add_to(self, flags.record_every)
	_clock = RunClock.new(flags.quit_after_frames, flags.quit_after_seconds)
	_before_first_step = _run.is_local()
	set_physics_process(true)
	set_process(_clock.is_limited())
	return true


# The parameters the game declares, handed to every agent before its first episode, then --env_param: "" or the error.
func _start_env_params(seed_value: int) -> String:
	var root: Node = get_tree().current_scene if _in_current_scene() else get_parent()
	var declared: Reference = EnvParams.declared_in(root)
	if declared.is_failure():
		return declared.message
	env_params = EnvParams.new(declared.value, agents.size(), seed_value)
	for i in range(agents.size()):
		agents[i].use_env_params(env_params, i)
	return env_params.apply_flags()


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
	if order.is_settling():
		if not order.advance(get_tree(), agents):
			return
	else:
		_frame += 1
		# An action holds for action_repeat physics frames; decisions happen on the first of them. The
		# first replies to nothing, so it cannot end an episode.
		if (_frame - 1) % action_repeat != 0 or (_frame > 1 and order.hold(get_tree(), agents)):
			return
	var ended: Reference = _run.step()
	if not ended.goes_on():
		_end(ended)
	if _demos != null and not stopping:
		ended = DemoHooks.after_step(_demos)
		if not ended.goes_on():
			_end(ended)


# Gives agent i its action (every local driver goes through here, so --record_demos sees it).
func act(i: int, action: Dictionary) -> void:
	agents[i].set_action(action)
	if _demos != null:
		_demos.on_action(i, action)


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
	var step := DecisionStep.json(agents, order.take_closed())
	if _demos != null:
		var error := _demos.on_step(step, false)
		if error != "":
			_fail(error)
	if _overlay != null:
		_overlay.show_agents(_mode_text(), agents)
	return step


# decision_step() for the binary step exchange: the same bookkeeping, its results packed into `into` as
# Wire's step reply wants them ([values, infos, frames], see DecisionStep.packed()); "" or, with the declared
# observation sizes, what is wrong when an agent's observation no longer has its size.
func decision_step_packed(into: Array, declared := PoolIntArray(), declared_total := 0) -> String:
	var problem := DecisionStep.packed(agents, into, declared, declared_total, order.take_closed())
	if _overlay != null and problem == "":
		_overlay.show_agents(_mode_text(), agents)
	return problem


func _mode_text() -> String:
	if _demos != null:
		return _run.text() + "\n" + _demos.summary()
	return _run.text()


# Reports how the mode or the recorder ended the run, by its Result's kind: DONE and CLOSED exit 0, the rest 1.
func _end(ended: Reference) -> void:
	if ended.kind == Result.Kind.DONE:
		_stop(0)
	elif ended.kind == Result.Kind.CLOSED:
		print("rl_sync: " + ended.message)
		_stop(0)
	elif ended.kind == Result.Kind.DISCONNECTED:
		if not stopping:
			printerr(Wire.Contract.ERROR_PREFIX + ended.message)
			_stop(1)
	else:
		_fail(ended.message)


func _fail(message: String) -> void:
	RlArgs.fail(get_tree(), message)
	_stop(1)


func _stop(exit_code: int) -> void:
	if stopping:
		return
	stopping = true
	set_physics_process(false)
	set_process(false)
	if _run != null:
		_run.close()
	get_tree().quit(exit_code)
