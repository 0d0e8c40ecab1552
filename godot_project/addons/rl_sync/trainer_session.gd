extends Reference
# The game's side of a conversation with a trainer (--port): connecting, the hello and handshake,
# and answering the trainer's messages until its next action.
#
# RLSync (sync.gd) holds one session in training mode and calls step() once per decision step.
# Nothing here quits or prints: every method returns "" to go on, or a String that ends the run,
# which RLSync reports (CLOSED: a clean end; Wire.DISCONNECTED; anything else: an error message).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")

# godot-rl 0.8's client sends handshake version 0.7; any 0.x is accepted.
const MAJOR_VERSION := "0"
# Version of our extensions (hello message, terminal observations, TimeLimit.truncated, stats,
# packed observations).
const EXTENSION_VERSION := 1
# Observation encodings a trainer may ask for in its handshake ("obs_encoding"); godot-rl asks for
# none and gets godot-rl's JSON lists.
const OBS_ENCODINGS := ["json", "f32_base64"]
# What step() returns when the trainer sent "close".
const CLOSED := "the trainer closed the session"

var stream: StreamPeerTCP = null
var obs_encoding := "json"

# The RLSync node: its env_name and decision_step(). A Node, so holding it makes no reference cycle.
var _sync: Node
# RLSync's own arrays (shared, not copied), so the hot path reads no property of another object.
var _agents: Array
var _action_spaces: Array
# One action_spec() per agent, read once, so the per-step checks index Arrays instead of
# looking keys up in the action spaces.
var _action_specs := []
var _packed_obs := false
var _awaiting_action_reply := false
# An action message holds a bracket or two per agent and action key; eight times that is room enough.
var _max_brackets := 0
# The methods a trainer may `call`: those the agents' controller scripts define, minus the engine's
# callbacks ("_..."). Calling anything else (queue_free, free...) would break the scene under the
# session and flood the log with a script error every frame.
var _callable := {}


func _init(sync_node: Node) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_action_spaces = sync_node.action_spaces
	var keys := 0
	for space in _action_spaces:
		_action_specs.append(action_spec(space))
		keys += space.size()
	_max_brackets = Wire.DEFAULT_MAX_BRACKETS + 8 * (_agents.size() + keys)
	for agent in _agents:
		for method in agent.get_script().get_script_method_list():
			if not method["name"].begins_with("_"):
				_callable[method["name"]] = true


# Keeps retrying until the deadline: godot-rl's client starts the game before it binds its port.
# `token` (--token, may be empty) goes into our hello.
func connect_to_trainer(port: int, timeout_s: float, token: String) -> String:
	var deadline := OS.get_ticks_msec() + int(timeout_s * 1000)
	while OS.get_ticks_msec() < deadline:
		stream = StreamPeerTCP.new()
		if stream.connect_to_host("127.0.0.1", port) == OK:
			while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and OS.get_ticks_msec() < deadline:
				OS.delay_msec(5)
			if stream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
				stream.set_no_delay(true)
				return _greet(deadline, token)
		stream.disconnect_from_host()
		OS.delay_msec(100)
	return "no trainer accepted a connection on 127.0.0.1:%d within %.0f s; quitting" % [port, timeout_s]


# Sends our hello (only with --token, so godot-rl's client never sees it) and waits for the
# trainer's handshake, both bounded by the connect deadline: a listening socket that never accepts
# must not keep a headless instance alive.
func _greet(deadline: int, token: String) -> String:
	if token != "":
		var sent := _send({
			"type": "hello",
			"token": token,
			"env": _sync.env_name,
			"n_agents": _agents.size(),
			"pid": OS.get_process_id(),
			"protocol": EXTENSION_VERSION,
		})
		if sent != OK:
			return Wire.DISCONNECTED
	while stream.get_available_bytes() < 4:
		if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
			return "the trainer closed the connection before its handshake (a wrong --token?); quitting"
		if OS.get_ticks_msec() >= deadline:
			return "connected, but the trainer sent no handshake in time; quitting"
		OS.delay_msec(2)
	var message = Wire.read_message(stream, _max_brackets)
	if typeof(message) == TYPE_STRING:
		return message
	if message["type"] != "handshake":
		return "the first message must be a handshake, got '%s'" % str(message["type"])
	return _check_handshake(message)


func close() -> void:
	if stream != null:
		stream.disconnect_from_host()


# One decision step: reply to the last action with the step's results, then answer requests until
# the next action arrives, which this applies (it moves the agents this physics frame).
func step() -> String:
	if _awaiting_action_reply:
		_awaiting_action_reply = false
		if stream.put_data(Wire.frame(Wire.step_json(_sync.decision_step(), _packed_obs))) != OK:
			return Wire.DISCONNECTED
	while true:
		var message = Wire.read_message(stream, _max_brackets)
		if typeof(message) == TYPE_STRING:
			return message
		var error := ""
		match message["type"]:
			"action":
				error = _apply_actions(message)
				_awaiting_action_reply = error == ""
				return error
			"reset":
				for agent in _agents:
					agent.begin_episode()
				var obs := []
				for agent in _agents:
					obs.append({"obs": agent.get_obs()})
				if _send({"type": "reset", "obs": obs}) != OK:
					return Wire.DISCONNECTED
			"env_info":
				if _send(_env_info()) != OK:
					return Wire.DISCONNECTED
			"call":
				if _send({"type": "call", "returns": _call_agents(str(message.get("method", "")))}) != OK:
					return Wire.DISCONNECTED
			"close":
				return CLOSED
			"handshake":
				error = _check_handshake(message)
				if error != "":
					return error
			"stats":
				if _send(_engine_stats()) != OK:
					return Wire.DISCONNECTED
			_:
				return "unknown message type '%s' (expected handshake, env_info, reset, action, call, stats or close)" \
						% str(message["type"])
	return ""


func _check_handshake(message: Dictionary) -> String:
	var major := str(message.get("major_version", "?"))
	if major != MAJOR_VERSION:
		return "the trainer speaks protocol version %s.%s; this game speaks %s.x (godot-rl 0.8): update one side" \
				% [major, str(message.get("minor_version", "?")), MAJOR_VERSION]
	var encoding := str(message.get("obs_encoding", "json"))
	if not encoding in OBS_ENCODINGS:
		return "the trainer asked for the observation encoding '%s'; this game knows %s" \
				% [encoding, str(OBS_ENCODINGS)]
	obs_encoding = encoding
	_packed_obs = encoding == "f32_base64"
	return ""


func _env_info() -> Dictionary:
	var obs_spaces := []
	var policy_names := []
	for agent in _agents:
		obs_spaces.append(agent.get_obs_space())
		policy_names.append("shared_policy")
	return {
		"type": "env_info",
		"n_agents": _agents.size(),
		"observation_space": obs_spaces,
		"action_space": _action_spaces,
		"agent_policy_names": policy_names,
		"env": _sync.env_name,
		"max_episode_steps": _agents[0].max_episode_steps,
		"extension_version": EXTENSION_VERSION,
		"obs_encoding": obs_encoding,
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


# godot-rl's `call`: each agent's result, or null where its controller does not define the method.
func _call_agents(method: String) -> Array:
	var returns := []
	for agent in _agents:
		returns.append(agent.call(method) if _callable.has(method) and agent.has_method(method) else null)
	return returns


# Every action is checked before any agent gets one, so a bad message moves no agent.
func _apply_actions(message: Dictionary) -> String:
	var actions = message.get("action")
	if typeof(actions) != TYPE_ARRAY or actions.size() != _agents.size():
		return "an action message needs a list of %d actions, one per agent; got %s" \
				% [_agents.size(), Wire.preview(actions)]
	var converted := []
	for i in range(_agents.size()):
		var action = convert_action(actions[i], _action_spaces[i], _action_specs[i])
		if typeof(action) == TYPE_STRING:
			return "the action for agent %d is invalid: %s" % [i, action]
		converted.append(action)
	for i in range(_agents.size()):
		_agents[i].set_action(converted[i])
	return ""


func _send(message: Dictionary) -> int:
	return Wire.write_message(stream, to_json(message))


# [[key, size, is_discrete], ...] for one action space, in the space's key order.
static func action_spec(space: Dictionary) -> Array:
	var spec := []
	for key in space:
		spec.append([key, int(space[key]["size"]), space[key]["action_type"] == "discrete"])
	return spec


# Returns the action in the controller's terms, or a String saying what is wrong with it. `spec` is
# action_spec(space); `space` only words the errors. This runs for every agent every step, so the
# checks are written inline.
static func convert_action(action, space: Dictionary, spec: Array):
	if typeof(action) != TYPE_DICTIONARY:
		return "expected an object with the keys %s, got %s" % [str(space.keys()), Wire.preview(action)]
	var result := {}
	for entry in spec:
		var key = entry[0]
		if not action.has(key):
			return "the key '%s' is missing (expected keys: %s)" % [key, str(space.keys())]
		var size: int = entry[1]
		var value = action[key]
		var kind := typeof(value)
		if entry[2]:
			if kind == TYPE_ARRAY and value.size() == 1:
				value = value[0]
				kind = typeof(value)
			if (kind != TYPE_REAL and kind != TYPE_INT) or is_nan(value) or value != floor(value) \
					or value < 0 or value >= size:
				return "'%s' must be an integer in [0, %d), got %s" % [key, size, Wire.preview(value)]
			result[key] = int(value)
			continue
		if kind == TYPE_REAL or kind == TYPE_INT:
			value = [value]
		elif kind != TYPE_ARRAY:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, Wire.preview(value)]
		if value.size() != size:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, Wire.preview(value)]
		for x in value:
			var t := typeof(x)
			if (t != TYPE_REAL and t != TYPE_INT) or is_nan(x) or is_inf(x):
				return "'%s' holds %s, which is not a finite number" % [key, Wire.preview(x)]
		result[key] = value
	return result
