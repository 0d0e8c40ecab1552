extends Node
# RLSync: drives every agent controller of a scene from a trainer, a policy file, or the keyboard.
#
# Add one RLSync node to a game scene. When that scene is the first of a run, the node also answers
# --list_envs and --env (see game_registry.gd). Its mode comes from the command line:
#   --port=P               train: connect to a trainer on 127.0.0.1:P and speak godot-rl's protocol
#   --policy=FILE          every agent is driven by a trained policy run in the engine (no trainer);
#                          with --eval_episodes=N it plays N episodes, prints their returns as JSON, quits
#   --benchmark_steps=N    random actions inside the engine for N decision steps, print the rate, quit
#   (none of these)        human play: every agent takes the keyboard action of its controller
# The wire protocol is godot-rl's (a 4-byte little-endian length, then UTF-8 JSON) so godot-rl's own
# GodotEnv drives any game that uses this node; our extensions sit where godot-rl's client ignores
# them (see "The wire protocol" in this folder's README.md).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const AgentController = preload("res://addons/rl_sync/agent_controller.gd")
const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const Overlay = preload("res://addons/rl_sync/overlay.gd")
const Recorder = preload("res://addons/rl_sync/recorder.gd")
const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")

# godot-rl 0.8's client sends handshake version 0.7; any 0.x is accepted.
const MAJOR_VERSION := "0"
# Version of our extensions (hello message, terminal observations, TimeLimit.truncated, stats,
# packed observations).
const EXTENSION_VERSION := 1
# Observation encodings a trainer may ask for in its handshake ("obs_encoding"); godot-rl asks for
# none and gets godot-rl's JSON lists.
const OBS_ENCODINGS := ["json", "f32_base64"]
const MAX_MESSAGE_BYTES := 64 * 1024 * 1024
const DEFAULT_CONNECT_TIMEOUT_S := 30.0
const BASE_PHYSICS_FPS := 60

enum Mode { HUMAN, TRAIN, BENCHMARK, POLICY }

# The game's name, sent to the trainer and checked against policy files. Empty: the scene file's
# base name. A game picked through the project's registry (rl_sync/games) takes its name there.
export var env_name := ""

var mode: int = Mode.HUMAN
var agents := []
var action_spaces := []
var action_repeat := 1
var stream: StreamPeerTCP = null
var stopping := false

var _frame := 0
var _obs_encoding := "json"
var _awaiting_action_reply := false
var _rng := RandomNumberGenerator.new()
var _benchmark_steps := 0
var _benchmark_done_steps := 0
var _benchmark_start_usec := 0
var _policy: PolicyRunner = null
var _overlay = null
# Evaluation: each agent plays its share of the episodes, so short episodes are not favoured.
var _eval_quota := []
var _eval_returns := []
var _eval_lengths := []
# How long a local run (policy, human) lasts: --quit_after_frames (recordings, benchmarks; each frame
# is one physics step with --fixed-fps) or --quit_after_seconds (wall clock, for watching).
var _quit_after_frames := 0
var _quit_after_usec := 0
var _run_start_usec := 0
var _run_start_drawn := 0
var _run_start_frames := 0


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
	var tree := get_tree()
	var seed_value = RlArgs.get_int(tree, "env_seed", 0, 0)
	var repeat = RlArgs.get_int(tree, "action_repeat", 1, 1)
	var max_steps = RlArgs.get_int(tree, "max_episode_steps", 0, 1)
	var speedup = RlArgs.get_positive_float(tree, "speedup", 1.0)
	var port = RlArgs.get_int(tree, "port", 0, 1)
	var timeout_s = RlArgs.get_positive_float(tree, "connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
	var bench_steps = RlArgs.get_int(tree, "benchmark_steps", 0, 1)
	var eval_episodes = RlArgs.get_int(tree, "eval_episodes", 0, 1)
	var quit_after = RlArgs.get_int(tree, "quit_after_frames", 0, 1)
	var quit_after_s = RlArgs.get_positive_float(tree, "quit_after_seconds", 0.0)
	var record_every = RlArgs.get_int(tree, "record_every", 4, 1)
	if RlArgs.has_failed():
		return
	action_repeat = repeat
	_rng.seed = seed_value

	# Game time per physics step stays 1/60 s whatever the speedup, so physics is the same at any
	# speed; with the engine's --fixed-fps flag, frames also stop waiting for the wall clock.
	Engine.time_scale = speedup
	Engine.iterations_per_second = int(round(BASE_PHYSICS_FPS * speedup))

	agents = _find_agents()
	if agents.empty():
		RlArgs.fail(tree, "no agent controllers found: add nodes extending agent_controller.gd to the scene")
		return
	for agent in agents:
		if max_steps > 0:
			agent.max_episode_steps = max_steps
		action_spaces.append(agent.get_action_space())
		agent.begin_episode()

	if port > 0:
		mode = Mode.TRAIN
		# Training renders as fast as it simulates; waiting for vsync would cap it at 60 steps/s.
		OS.vsync_enabled = false
		if not _connect(port, timeout_s):
			return
	elif RlArgs.get_string("policy", "") != "":
		mode = Mode.POLICY
		# --policy_forward checks the network alone (any policy file), so it skips the agent check.
		var forward_only := RlArgs.has("policy_forward")
		if not _load_policy(RlArgs.get_string("policy", ""), not forward_only):
			return
		if forward_only:
			_print_policy_outputs(RlArgs.get_string("policy_forward", ""))
			return
		if eval_episodes > 0:
			for i in range(agents.size()):
				_eval_quota.append(eval_episodes / agents.size() + (1 if i < eval_episodes % agents.size() else 0))
	elif bench_steps > 0:
		mode = Mode.BENCHMARK
		_benchmark_steps = bench_steps
	if not RlArgs.is_headless():
		_overlay = Overlay.new()
		add_child(_overlay)
		if RlArgs.has("no_vsync"):
			OS.vsync_enabled = false
		if RlArgs.get_string("record_dir", "") != "":
			var recorder = Recorder.new()
			recorder.directory = RlArgs.get_string("record_dir", "")
			recorder.every = record_every
			add_child(recorder)
	_quit_after_frames = quit_after
	_quit_after_usec = int(quit_after_s * 1e6)
	_run_start_usec = OS.get_ticks_usec()
	_run_start_drawn = Engine.get_frames_drawn()
	_run_start_frames = Engine.get_idle_frames()
	set_physics_process(true)
	set_process(_quit_after_frames > 0 or _quit_after_usec > 0)


# Ends a run of --quit_after_frames frames or --quit_after_seconds with a report of the rates it held.
func _process(_delta: float) -> void:
	if stopping:
		return
	if _quit_after_frames > 0 and Engine.get_idle_frames() - _run_start_frames < _quit_after_frames:
		return
	if _quit_after_usec > 0 and OS.get_ticks_usec() - _run_start_usec < _quit_after_usec:
		return
	var seconds := (OS.get_ticks_usec() - _run_start_usec) / 1e6
	var drawn := Engine.get_frames_drawn() - _run_start_drawn
	print(to_json({"run": {
		"mode": _mode_text(),
		"agents": agents.size(),
		"seconds": seconds,
		"frames_drawn": drawn,
		"physics_frames": _frame,
		"fps": drawn / max(seconds, 1e-9),
		"physics_fps": _frame / max(seconds, 1e-9),
	}}))
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
			_train_step()
		Mode.BENCHMARK:
			_benchmark_step()
		Mode.POLICY:
			_policy_step()
		Mode.HUMAN:
			decision_step()
			for agent in agents:
				agent.set_action(agent.get_heuristic_action())


# One decision step for every agent: collect the reward earned since the last one, apply the time
# limit, and start a new episode at once for agents whose episode ended, keeping the last
# observation of the ended episode in that agent's info as "terminal_observation".
func decision_step() -> Dictionary:
	var obs := []
	var rewards := []
	var dones := []
	var infos := []
	for agent in agents:
		agent.n_steps += 1
		var reward: float = agent.reward
		agent.reward = 0.0
		agent.episode_return += reward
		var truncated: bool = not agent.done and agent.n_steps >= agent.max_episode_steps
		var ended: bool = agent.done or truncated
		var info: Dictionary = agent.get_info()
		if ended:
			# The ended episode's info, copied before begin_episode() resets the controller: a
			# controller may return a Dictionary it keeps and clears, and our keys must not go into it.
			info = info.duplicate(true)
			info["terminal_observation"] = {"obs": agent.get_obs()}
			info["TimeLimit.truncated"] = truncated
			agent.last_episode_return = agent.episode_return
			agent.last_episode_length = agent.n_steps
			agent.begin_episode()
		obs.append({"obs": agent.get_obs()})
		rewards.append(reward)
		dones.append(ended)
		infos.append(info)
	if _overlay != null:
		_overlay.show_agents(_mode_text(), agents)
	return {"obs": obs, "reward": rewards, "done": dones, "info": infos}


func _mode_text() -> String:
	match mode:
		Mode.TRAIN:
			return "training (%s)" % env_name
		Mode.POLICY:
			return "policy: %s" % _policy.path.get_file()
		Mode.BENCHMARK:
			return "benchmark: random actions"
	return "human play: arrow keys or WASD"


func _benchmark_step() -> void:
	if _benchmark_done_steps == 0:
		_benchmark_start_usec = OS.get_ticks_usec()
	decision_step()
	for i in range(agents.size()):
		agents[i].set_action(_random_action(action_spaces[i]))
	_benchmark_done_steps += 1
	if _benchmark_done_steps >= _benchmark_steps:
		var seconds := (OS.get_ticks_usec() - _benchmark_start_usec) / 1e6
		print(to_json({"benchmark": {
			"env": env_name,
			"agents": agents.size(),
			"decision_steps": _benchmark_done_steps,
			"action_repeat": action_repeat,
			"seconds": seconds,
			"agent_steps_per_second": _benchmark_done_steps * agents.size() / max(seconds, 1e-9),
		}}))
		_stop(0)


func _random_action(space: Dictionary) -> Dictionary:
	var action := {}
	for key in space:
		var size := int(space[key]["size"])
		if space[key]["action_type"] == "discrete":
			action[key] = _rng.randi_range(0, size - 1)
		else:
			var values := []
			for _i in range(size):
				values.append(_rng.randf_range(-1.0, 1.0))
			action[key] = values
	return action


# --- Policy: a trained network drives every agent, without a trainer -------------------------------

func _load_policy(file_path: String, check_agents: bool) -> bool:
	_policy = PolicyRunner.new()
	var error := _policy.load_file(file_path)
	if error == "" and check_agents:
		error = _policy.check_agent(env_name, agents[0].get_obs().size(), action_spaces[0])
	if error != "":
		_fail(error)
		return false
	return true


func _policy_step() -> void:
	var step := decision_step()
	for i in range(agents.size()):
		if not _eval_quota.empty() and step["done"][i] and _eval_quota[i] > 0:
			_eval_quota[i] -= 1
			_eval_returns.append(agents[i].last_episode_return)
			_eval_lengths.append(agents[i].last_episode_length)
		agents[i].set_action(_policy.act(step["obs"][i]["obs"]))
	if not _eval_quota.empty() and _eval_quota.max() == 0:
		var total := 0.0
		for r in _eval_returns:
			total += r
		print(to_json({"eval": {
			"env": env_name,
			"policy": _policy.path,
			"seed": _rng.seed,
			"episodes": _eval_returns.size(),
			"returns": _eval_returns,
			"lengths": _eval_lengths,
			"mean_return": total / _eval_returns.size(),
		}}))
		_stop(0)


# Parity check with the trainer: reads {"observations": [[...], ...]} and prints the raw network
# outputs and the chosen actions at full precision (to_json keeps only 6 digits).
func _print_policy_outputs(input_path: String) -> void:
	var file := File.new()
	if file.open(input_path, File.READ) != OK:
		_fail("--policy_forward: cannot read %s" % input_path)
		return
	var parsed := JSON.parse(file.get_as_text())
	file.close()
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY or not parsed.result.has("observations"):
		_fail("--policy_forward: %s must be JSON {\"observations\": [[...], ...]}" % input_path)
		return
	var lines := PoolStringArray()
	for obs in parsed.result["observations"]:
		var outputs := _policy.forward(obs)
		var numbers := PoolStringArray()
		for value in outputs:
			numbers.append("%.9f" % value)
		lines.append("{\"outputs\": [%s], \"action\": %s}" % [numbers.join(", "), to_json(_policy.outputs_to_action(outputs))])
	print("{\"forward\": [%s]}" % lines.join(", "))
	_stop(0)


# --- Training: the trainer's side of the conversation ------------------------------------------

func _train_step() -> void:
	if _awaiting_action_reply:
		_send_text(_step_json(decision_step()))
		_awaiting_action_reply = false
	# Answer requests until the next action arrives; that action moves the agents this frame.
	while not stopping:
		var message = _read_message()
		if message == null:
			return
		match message["type"]:
			"action":
				_apply_actions(message)
				_awaiting_action_reply = true
				return
			"reset":
				for agent in agents:
					agent.begin_episode()
				var obs := []
				for agent in agents:
					obs.append({"obs": agent.get_obs()})
				_send({"type": "reset", "obs": obs})
			"env_info":
				_send(_env_info())
			"call":
				_send({"type": "call", "returns": _call_agents(str(message.get("method", "")))})
			"close":
				print("rl_sync: the trainer closed the session")
				_stop(0)
			"handshake":
				_check_handshake(message)
			"stats":
				_send(_engine_stats())
			_:
				_fail("unknown message type '%s' (expected handshake, env_info, reset, action, call, stats or close)"
						% str(message["type"]))


func _env_info() -> Dictionary:
	var obs_spaces := []
	var policy_names := []
	for agent in agents:
		obs_spaces.append(agent.get_obs_space())
		policy_names.append("shared_policy")
	return {
		"type": "env_info",
		"n_agents": agents.size(),
		"observation_space": obs_spaces,
		"action_space": action_spaces,
		"agent_policy_names": policy_names,
		"env": env_name,
		"max_episode_steps": agents[0].max_episode_steps,
		"extension_version": EXTENSION_VERSION,
		"obs_encoding": _obs_encoding,
	}


# Our extension for profiling: the engine's own counters (godot-rl never sends "stats").
func _engine_stats() -> Dictionary:
	return {
		"type": "stats",
		"time_usec": OS.get_ticks_usec(),
		"physics_frames": Engine.get_physics_frames(),
		"idle_frames": Engine.get_idle_frames(),
		"frames_drawn": Engine.get_frames_drawn(),
		"fps": Engine.get_frames_per_second(),
		"physics_ticks_per_second": Engine.iterations_per_second,
		"headless": RlArgs.is_headless(),
		"engine_version": Engine.get_version_info()["string"],
	}


func _call_agents(method: String) -> Array:
	var returns := []
	for agent in agents:
		returns.append(agent.call(method) if agent.has_method(method) else null)
	return returns


func _apply_actions(message: Dictionary) -> void:
	var actions = message.get("action")
	if typeof(actions) != TYPE_ARRAY or actions.size() != agents.size():
		_fail("an action message needs a list of %d actions, one per agent; got %s"
				% [agents.size(), _preview(actions)])
		return
	var converted := []
	for i in range(agents.size()):
		var action = _convert_action(actions[i], action_spaces[i])
		if typeof(action) == TYPE_STRING:
			_fail("the action for agent %d is invalid: %s" % [i, action])
			return
		converted.append(action)
	for i in range(agents.size()):
		agents[i].set_action(converted[i])


# Returns the action in the controller's terms, or a String saying what is wrong with it.
# This runs for every agent every step, so the checks are written inline.
func _convert_action(action, space: Dictionary):
	if typeof(action) != TYPE_DICTIONARY:
		return "expected an object with the keys %s, got %s" % [str(space.keys()), _preview(action)]
	var result := {}
	for key in space:
		if not action.has(key):
			return "the key '%s' is missing (expected keys: %s)" % [key, str(space.keys())]
		var size := int(space[key]["size"])
		var value = action[key]
		var kind := typeof(value)
		if space[key]["action_type"] == "discrete":
			if kind == TYPE_ARRAY and value.size() == 1:
				value = value[0]
				kind = typeof(value)
			if (kind != TYPE_REAL and kind != TYPE_INT) or is_nan(value) or value != floor(value) \
					or value < 0 or value >= size:
				return "'%s' must be an integer in [0, %d), got %s" % [key, size, _preview(value)]
			result[key] = int(value)
			continue
		if kind == TYPE_REAL or kind == TYPE_INT:
			value = [value]
		elif kind != TYPE_ARRAY:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, _preview(value)]
		if value.size() != size:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, _preview(value)]
		for x in value:
			var t := typeof(x)
			if (t != TYPE_REAL and t != TYPE_INT) or is_nan(x) or is_inf(x):
				return "'%s' holds %s, which is not a finite number" % [key, _preview(x)]
		result[key] = value
	return result


func _preview(value) -> String:
	var text := to_json(value) if typeof(value) in [TYPE_ARRAY, TYPE_DICTIONARY] else str(value)
	return text if text.length() <= 120 else text.substr(0, 120) + "..."


func _check_handshake(message: Dictionary) -> void:
	var major := str(message.get("major_version", "?"))
	if major != MAJOR_VERSION:
		_fail("the trainer speaks protocol version %s.%s; this game speaks %s.x (godot-rl 0.8): update one side"
				% [major, str(message.get("minor_version", "?")), MAJOR_VERSION])
		return
	var encoding := str(message.get("obs_encoding", "json"))
	if not encoding in OBS_ENCODINGS:
		_fail("the trainer asked for the observation encoding '%s'; this game knows %s" % [encoding, str(OBS_ENCODINGS)])
		return
	_obs_encoding = encoding


# --- Connection ----------------------------------------------------------------------------------

# Keeps retrying until the deadline: godot-rl's client starts the game before it binds its port.
func _connect(port: int, timeout_s: float) -> bool:
	var deadline := OS.get_ticks_msec() + int(timeout_s * 1000)
	while OS.get_ticks_msec() < deadline:
		stream = StreamPeerTCP.new()
		if stream.connect_to_host("127.0.0.1", port) == OK:
			while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and OS.get_ticks_msec() < deadline:
				OS.delay_msec(5)
			if stream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
				stream.set_no_delay(true)
				return _greet(deadline)
		stream.disconnect_from_host()
		OS.delay_msec(100)
	_fail("no trainer accepted a connection on 127.0.0.1:%d within %.0f s; quitting" % [port, timeout_s])
	return false


# Sends our hello (only with --token, so godot-rl's client never sees it) and waits for the
# trainer's handshake, both bounded by the connect deadline: a listening socket that never accepts
# must not keep a headless instance alive.
func _greet(deadline: int) -> bool:
	var token := RlArgs.get_string("token", "")
	if token != "":
		_send({
			"type": "hello",
			"token": token,
			"env": env_name,
			"n_agents": agents.size(),
			"pid": OS.get_process_id(),
			"protocol": EXTENSION_VERSION,
		})
	while stream.get_available_bytes() < 4:
		if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
			_fail("the trainer closed the connection before its handshake (a wrong --token?); quitting")
			return false
		if OS.get_ticks_msec() >= deadline:
			_fail("connected, but the trainer sent no handshake in time; quitting")
			return false
		OS.delay_msec(2)
	var message = _read_message()
	if message == null:
		return false
	if message["type"] != "handshake":
		_fail("the first message must be a handshake, got '%s'" % str(message["type"]))
		return false
	_check_handshake(message)
	return not stopping


func _read_message():
	var header: Array = stream.get_data(4)
	if header[0] != OK:
		_disconnected()
		return null
	var b: PoolByteArray = header[1]
	var length := b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
	if length <= 0 or length > MAX_MESSAGE_BYTES:
		_fail("a message announced %d bytes; the limit is %d (is the trainer speaking godot-rl's protocol?)"
				% [length, MAX_MESSAGE_BYTES])
		return null
	var body: Array = stream.get_data(length)
	if body[0] != OK:
		_disconnected()
		return null
	var text: String = body[1].get_string_from_utf8()
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		_fail("malformed JSON from the trainer (line %d: %s): %s"
				% [parsed.error_line, parsed.error_string, _preview(text)])
		return null
	if typeof(parsed.result) != TYPE_DICTIONARY or not parsed.result.has("type"):
		_fail("every message must be a JSON object with a \"type\"; got %s" % _preview(text))
		return null
	return parsed.result


# The step reply, built by hand: str() of a PoolRealArray is already a JSON list of numbers and
# costs less than half of to_json() on the same data, and this runs every decision step.
func _step_json(step: Dictionary) -> String:
	var obs_json := ""
	if _obs_encoding == "f32_base64":
		obs_json = "\"obs_f32\":\"" + _packed_obs(step["obs"]) + "\""
	else:
		var obs := PoolStringArray()
		for agent_obs in step["obs"]:
			obs.append("{\"obs\":" + str(PoolRealArray(agent_obs["obs"])) + "}")
		obs_json = "\"obs\":[" + obs.join(",") + "]"
	# Rewards keep 9 decimals: small shaping terms would lose their digits in str()'s 6.
	var rewards := PoolStringArray()
	for reward in step["reward"]:
		rewards.append("%.9f" % reward)
	return "{\"type\":\"step\"," + obs_json + ",\"reward\":[" \
			+ rewards.join(",") + "],\"done\":" + to_json(step["done"]) \
			+ ",\"info\":" + to_json(step["info"]) + "}"


# Every agent's observation, concatenated as little-endian float32 and base64-encoded: the trainer
# asked for it in its handshake. Packing and encoding are native calls, about 5x cheaper than text.
func _packed_obs(obs: Array) -> String:
	var packed := PoolRealArray()
	for agent_obs in obs:
		packed.append_array(PoolRealArray(agent_obs["obs"]))
	# var2bytes writes a 4-byte type and a 4-byte count before the floats.
	var bytes := var2bytes(packed)
	return Marshalls.raw_to_base64(bytes.subarray(8, bytes.size() - 1)) if packed.size() > 0 else ""


func _send(message: Dictionary) -> void:
	_send_text(to_json(message))


func _send_text(text: String) -> void:
	# Frame by UTF-8 byte length, in one write (put_string would mangle non-ASCII text).
	var body := text.to_utf8()
	var n := body.size()
	var packet := PoolByteArray([n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])
	packet.append_array(body)
	if stream.put_data(packet) != OK:
		_disconnected()


func _disconnected() -> void:
	if stopping:
		return
	printerr("rl_sync: error: the trainer disconnected; quitting")
	_stop(1)


func _fail(message: String) -> void:
	RlArgs.fail(get_tree(), message)
	_stop(1)


func _stop(exit_code: int) -> void:
	if stopping:
		return
	stopping = true
	set_physics_process(false)
	set_process(false)
	if stream != null:
		stream.disconnect_from_host()
	get_tree().quit(exit_code)
