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
# Step encodings ("step_encoding" in the handshake): godot-rl's JSON, or our binary step exchange
# (packed actions in, one packed block of observations, rewards and statuses out; see wire.gd).
const STEP_ENCODINGS := ["json", "binary"]
# What step() returns when the trainer sent "close".
const CLOSED := "the trainer closed the session"

var stream: StreamPeerTCP = null
var obs_encoding := "json"
var step_encoding := "json"

# The RLSync node: its env_name and decision_step(). A Node, so holding it makes no reference cycle.
var _sync: Node
# RLSync's own arrays (shared, not copied), so the hot path reads no property of another object.
var _agents: Array
var _action_spaces: Array
# One action_spec() per agent, read once, so the per-step checks index Arrays instead of
# looking keys up in the action spaces.
var _action_specs := []
var _packed_obs := false
var _binary := false
# For packed actions: one spec per agent in sorted key order (the order the trainer packs them in),
# and how many float32 and int32 values a whole message holds.
var _sorted_specs := []
var _packed_floats := 0
var _packed_ints := 0
# For each int32 value of packed actions: its key's number of choices, and [agent index, key].
var _int_sizes := PoolIntArray()
var _int_owners := []
# Where a decision step's time goes, in microseconds summed over `steps` (reported by "stats"): building
# and sending the reply, waiting for the trainer's next message, reading and decoding it, checking
# and applying the actions, and everything between two decision steps (physics, the main loop).
var _timing := {"steps": 0, "reply_usec": 0, "wait_usec": 0, "read_usec": 0, "apply_usec": 0, "outside_usec": 0}
var _left_step_usec := 0
var _awaiting_action_reply := false
# The reply goes in the action's kind: a packed action gets a packed reply, a JSON one a JSON reply.
var _packed_reply := false
# An action message holds a bracket or two per agent and action key; eight times that is room enough.
var _max_brackets := 0
# The methods a trainer may `call`: those the agents' controller scripts define, minus the engine's
# callbacks ("_..."). Calling anything else (queue_free, free...) would break the scene under the
# session and flood the log with a script error every frame. Each maps to [fewest, most] arguments,
# checked before the call: a wrong count would be a script error, not an answer.
var _callable := {}


func _init(sync_node: Node) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_action_spaces = sync_node.action_spaces
	var keys := 0
	for space in _action_spaces:
		_action_specs.append(action_spec(space))
		keys += space.size()
		var sorted_spec := sorted_action_spec(space)
		_sorted_specs.append(sorted_spec)
		for entry in sorted_spec:
			if entry[2]:
				_packed_ints += 1
				_int_sizes.append(entry[1])
				_int_owners.append([_sorted_specs.size() - 1, entry[0]])
			else:
				_packed_floats += entry[1]
	_max_brackets = Wire.DEFAULT_MAX_BRACKETS + 8 * (_agents.size() + keys)
	for agent in _agents:
		for method in agent.get_script().get_script_method_list():
			if not method["name"].begins_with("_"):
				var most: int = method["args"].size()
				_callable[method["name"]] = [most - method["default_args"].size(), most]


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
	var start := OS.get_ticks_usec()
	if _awaiting_action_reply:
		_awaiting_action_reply = false
		var packet: PoolByteArray
		if _packed_reply:
			var packed: Array = _sync.decision_step_packed()
			packet = Wire.packed_step_frame(packed[0], packed[1])
		else:
			packet = Wire.frame(Wire.step_json(_sync.decision_step(), _packed_obs))
		if stream.put_data(packet) != OK:
			return Wire.DISCONNECTED
	var sent := OS.get_ticks_usec()
	while true:
		# Blocks (in poll(), woken by the data) until the trainer's next message begins.
		var length := Wire.read_length(stream)
		var arrived := OS.get_ticks_usec()
		var message = Wire.read_body(stream, length, _max_brackets, _binary)
		if typeof(message) == TYPE_STRING:
			return message
		var error := ""
		if typeof(message) == TYPE_RAW_ARRAY:
			var decoded := OS.get_ticks_usec()
			error = _apply_packed_actions(message)
			_awaiting_action_reply = error == ""
			_packed_reply = true
			_count_step(start, sent, arrived, decoded)
			return error
		match message["type"]:
			"action":
				var decoded := OS.get_ticks_usec()
				error = _apply_actions(message)
				_awaiting_action_reply = error == ""
				_packed_reply = false
				_count_step(start, sent, arrived, decoded)
				return error
			"reset":
				for agent in _agents:
					agent.begin_episode()
				var obs := []
				for agent in _agents:
					obs.append({"obs": agent.get_obs()})
				# Packed like the step replies when the handshake asked for it: exact to float32.
				var reply := {"type": "reset", "obs_f32": Wire.pack_obs(obs)} if _packed_obs \
						else {"type": "reset", "obs": obs}
				if _send(reply) != OK:
					return Wire.DISCONNECTED
			"env_info":
				if _send(_env_info()) != OK:
					return Wire.DISCONNECTED
			"call":
				var returns = _call_agents(str(message.get("method", "")), message)
				if typeof(returns) == TYPE_STRING:
					return returns
				if _send({"type": "call", "returns": returns}) != OK:
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
	var steps := str(message.get("step_encoding", "json"))
	if not steps in STEP_ENCODINGS:
		return "the trainer asked for the step encoding '%s'; this game knows %s" % [steps, str(STEP_ENCODINGS)]
	obs_encoding = encoding
	_packed_obs = encoding == "f32_base64"
	step_encoding = steps
	_binary = steps == "binary"
	return ""


# Adds one decision step to the timing "stats" reports (see _timing).
func _count_step(start: int, sent: int, arrived: int, decoded: int) -> void:
	var now := OS.get_ticks_usec()
	_timing["steps"] += 1
	if _left_step_usec > 0:
		_timing["outside_usec"] += start - _left_step_usec
	_timing["reply_usec"] += sent - start
	_timing["wait_usec"] += arrived - sent
	_timing["read_usec"] += decoded - arrived
	_timing["apply_usec"] += now - decoded
	_left_step_usec = now


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
		"step_encoding": step_encoding,
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
		"session": _timing.duplicate(),
	}


# godot-rl's `call`: each agent's result, or null where its controller does not define the method.
# Our extension: arguments, the same for every agent ("args": [...]) or one list per agent
# ("agent_args": [[...], ...]); godot-rl sends neither. Returns the results, or a String saying what
# is wrong with the arguments (checked for every agent before any is called).
func _call_agents(method: String, message: Dictionary):
	var shared = message.get("args", [])
	var per_agent = message.get("agent_args")
	if typeof(shared) != TYPE_ARRAY:
		return "call '%s': \"args\" must be a list of arguments, got %s" % [method, Wire.preview(shared)]
	if per_agent != null and (typeof(per_agent) != TYPE_ARRAY or per_agent.size() != _agents.size()):
		return "call '%s': \"agent_args\" must hold one list of arguments per agent (%d), got %s" \
				% [method, _agents.size(), Wire.preview(per_agent)]
	var arg_lists := []
	for i in range(_agents.size()):
		var args = shared if per_agent == null else per_agent[i]
		if typeof(args) != TYPE_ARRAY:
			return "call '%s': the arguments of agent %d must be a list, got %s" % [method, i, Wire.preview(args)]
		if _callable.has(method) and _agents[i].has_method(method):
			var counts: Array = _callable[method]
			if args.size() < counts[0] or args.size() > counts[1]:
				return "call '%s': it takes %s arguments, agent %d was given %d" \
						% [method, str(counts[0]) if counts[0] == counts[1] else "%d to %d" % counts, i, args.size()]
		arg_lists.append(args)
	var returns := []
	for i in range(_agents.size()):
		var agent = _agents[i]
		returns.append(agent.callv(method, arg_lists[i]) if _callable.has(method) and agent.has_method(method) else null)
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


# The binary twin of _apply_actions(): the same checks (finite values, discrete values in range), on
# values unpacked from the message in each agent's sorted key order.
func _apply_packed_actions(body: PoolByteArray) -> String:
	var unpacked = Wire.unpack_actions(body, _packed_floats, _packed_ints)
	if typeof(unpacked) == TYPE_STRING:
		return unpacked
	var floats: PoolRealArray = unpacked[0]
	var ints: PoolIntArray = unpacked[1]
	# One sum finds any NaN or infinity (a sum of finite float32 values cannot overflow a float64);
	# only then is the culprit looked for.
	var total := 0.0
	for x in floats:
		total += x
	if is_nan(total) or is_inf(total):
		return _non_finite_action(floats)
	for k in range(ints.size()):
		var choice: int = ints[k]
		if choice < 0 or choice >= _int_sizes[k]:
			var owner: Array = _int_owners[k]
			return "the action for agent %d is invalid: '%s' must be an integer in [0, %d), got %d" \
					% [owner[0], owner[1], _int_sizes[k], choice]
	# Every value is valid: each agent gets its action as soon as it is built.
	var f := 0
	var d := 0
	for i in range(_agents.size()):
		var action := {}
		for entry in _sorted_specs[i]:
			if entry[2]:
				action[entry[0]] = ints[d]
				d += 1
				continue
			var size: int = entry[1]
			if size == 2:  # the usual case (a 2-D move), written out: a third quicker than the loop
				action[entry[0]] = [floats[f], floats[f + 1]]
				f += 2
			else:
				var values := []
				for _j in range(size):
					values.append(floats[f])
					f += 1
				action[entry[0]] = values
		_agents[i].set_action(action)
	return ""


# The error for the first NaN or infinite value among packed continuous actions.
func _non_finite_action(floats: PoolRealArray) -> String:
	var f := 0
	for i in range(_agents.size()):
		for entry in _sorted_specs[i]:
			if entry[2]:
				continue
			for _j in range(entry[1]):
				var x: float = floats[f]
				f += 1
				if is_nan(x) or is_inf(x):
					return "the action for agent %d is invalid: '%s' holds %s, which is not a finite number" \
							% [i, entry[0], str(x)]
	return "packed actions hold a value that is not a finite number"


func _send(message: Dictionary) -> int:
	return Wire.write_message(stream, to_json(message))


# [[key, size, is_discrete], ...] for one action space, in the space's key order.
static func action_spec(space: Dictionary) -> Array:
	var spec := []
	for key in space:
		spec.append([key, int(space[key]["size"]), space[key]["action_type"] == "discrete"])
	return spec


# action_spec() with the keys in sorted order: the order of the values in packed actions.
static func sorted_action_spec(space: Dictionary) -> Array:
	var keys := space.keys()
	keys.sort()
	var spec := []
	for key in keys:
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
