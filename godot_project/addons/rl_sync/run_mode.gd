extends Reference
# The mode of a run and its helper, picked once from the command line:
#   --port=P               TRAIN: a trainer drives the agents (trainer_session.gd)
#   --policy=FILE|random   POLICY: trained networks run in the engine (policy_mode.gd; with
#                          --opponent, matches of team 0 against team 1, match_mode.gd)
#   --benchmark_steps=N    BENCHMARK: random actions and the rate (benchmark_mode.gd)
#   (none of these)        HUMAN: every agent takes the keyboard action of its controller; but a
#                          game run from its project folder (the editor's Play) first looks for a
#                          trainer on the editor port, once, with no token (`godot-ppo train
#                          --editor`, or godot-rl's own trainer), and is TRAIN when one answers
#
# RLSync (sync.gd) holds one and calls step() at every decision step. Nothing here quits or prints
# (but the helpers' reports, and the editor port's one line): start() and step() return a Result
# (result.gd): the run goes on, or it ends and RLSync reports how (DONE: the mode's work is over).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const RunFlags = preload("res://addons/rl_sync/run_flags.gd")
const TrainerSession = preload("res://addons/rl_sync/trainer_session.gd")
const PolicyMode = preload("res://addons/rl_sync/policy_mode.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")
const FragmentMode = preload("res://addons/rl_sync/fragment_mode.gd")
const Result = preload("res://addons/rl_sync/result.gd")

enum Mode { HUMAN, TRAIN, BENCHMARK, POLICY }

var mode: int = Mode.HUMAN
# The helper of the mode (null for the others, and for human play, which needs none).
var session: TrainerSession = null
var policy_mode: PolicyMode = null
var benchmark: BenchmarkMode = null
# What a local mode's step() returns while the run goes on: one Result for the run, not one a step.
var _goes_on: Reference = Result.go_on()

# The RLSync node: its agents, decision_step() and act(). A Node, so holding it makes no reference cycle.
var _sync: Node


func _init(sync_node: Node) -> void:
	_sync = sync_node


# Picks the mode from the flags and starts its helper (connects to the trainer, loads the policy
# files). Called once the agents are found and have begun their first episodes.
func start(flags: RunFlags) -> Reference:
	if flags.port > 0:
		mode = Mode.TRAIN
		# Training renders as fast as it simulates; waiting for vsync would cap it at 60 steps/s.
		OS.vsync_enabled = false
		session = TrainerSession.new(_sync)
		return session.connect_to_trainer(flags.port, flags.connect_timeout, RunFlags.token())
	# A trainer hears the env_info of a game with cameras before the refusal (at its reset); a local
	# mode has nothing to answer first.
	var refusal := CameraFrames.refusal(_sync.get_tree())
	if refusal != "":
		return Result.failed(refusal)
	if RlArgs.get_string("policy", "") != "":
		mode = Mode.POLICY
		policy_mode = PolicyMode.new(_sync, flags.env_seed)
		return policy_mode.start(flags.eval_episodes)
	if RlArgs.has("opponent"):
		return Result.failed("--opponent=%s plays against a policy: add --policy=FILE, random or scripted" % RlArgs.get_string("opponent"))
	if flags.benchmark_steps > 0:
		mode = Mode.BENCHMARK
		benchmark = BenchmarkMode.new(_sync, flags.benchmark_steps, flags.env_seed)
	elif RunFlags.from_project_folder():
		_look_for_editor_trainer()
	return Result.go_on()


# The editor's Play: trains when a trainer listens on the editor port, else a person plays. Either
# way the editor's Output panel says which, in one line.
func _look_for_editor_trainer() -> void:
	var port := RunFlags.editor_port()
	if port == 0:
		print("rl_sync: the editor port (%s, or the setting %s) is not a number from 1 to 65535: human play"
				% [RunFlags.EDITOR_PORT_VARIABLE, RunFlags.EDITOR_PORT_SETTING])
		return
	var trainer := TrainerSession.new(_sync)
	var connected: Reference = trainer.try_connect(port, RunFlags.EDITOR_CONNECT_S)
	if connected.kind != Result.Kind.GO_ON:
		trainer.close()
		var hint := "; `godot-ppo train --editor` listens there"
		if connected.kind == Result.Kind.BUSY:  # that trainer trains another game
			hint = "; stop that training first, or give this game another port (%s)" % RunFlags.EDITOR_PORT_SETTING
		print("rl_sync: human play (%s%s)" % [connected.message.trim_suffix("; quitting"), hint])
		return
	mode = Mode.TRAIN
	OS.vsync_enabled = false
	session = trainer
	print("rl_sync: training with the trainer on 127.0.0.1:%d" % port)


# One decision step in the mode: the trainer's reply and next action, or the game's own choice.
func step() -> Reference:
	match mode:
		Mode.TRAIN:  # then the game's own actions for the agents it drives (driver_message.gd)
			if FragmentMode.collecting(_sync):  # in-engine actors collecting a fragment (fragment_mode.gd)
				var collected: Reference = FragmentMode.step(_sync)
				if not collected.goes_on() or FragmentMode.collecting(_sync):
					return collected
			var stepped: Reference = session.step()
			if not FragmentMode.collecting(_sync):  # a fragment begun: its recorder drove them (fragment_recorder.gd)
				preload("res://addons/rl_sync/driver_message.gd").act_for(_sync)
			return stepped
		Mode.BENCHMARK:
			return Result.done() if benchmark.step() else _goes_on
		Mode.POLICY:
			return Result.done() if policy_mode.step() else _goes_on
	_sync.decision_step()
	var agents: Array = _sync.agents
	for i in range(agents.size()):
		_sync.act(i, agents[i].get_heuristic_action())
	return _goes_on


# Whether the game chooses its own actions (policy, benchmark, human play), not a trainer.
func is_local() -> bool:
	return mode != Mode.TRAIN


# The overlay's and the {"run": ...} report's words for the mode.
func text() -> String:
	match mode:
		Mode.TRAIN:
			return "training (%s)" % _sync.env_name
		Mode.POLICY:
			return "policy: %s" % policy_mode.file_names()
		Mode.BENCHMARK:
			return "benchmark: random actions"
	return "human play: arrow keys or WASD"


# Ends the trainer's session, if any (the run is stopping).
func close() -> void:
	if session != null:
		session.close()
