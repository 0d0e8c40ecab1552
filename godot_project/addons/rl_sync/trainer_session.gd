extends Reference
# The game's side of a conversation with a trainer (--port): the session loop, which replies to the
# trainer's last action with the step's results and answers its messages until its next action.
#
# RLSync (sync.gd) holds one session in training mode and calls step() once per decision step.
# The session's parts: trainer_handshake.gd (connecting, hello, handshake), json_actions.gd and packed_actions.gd
# (actions), agent_calls.gd (`call`), session_stats.gd (`stats`), fragment_mode.gd (in-engine actors), over wire.gd's
# bytes. Nothing here quits or prints: every method returns a Result (result.gd), which says whether the run goes on.

const Wire = preload("res://addons/rl_sync/wire.gd")
const TrainerHandshake = preload("res://addons/rl_sync/trainer_handshake.gd")
const Contract = preload("res://addons/rl_sync/contract.gd")
const JsonActions = preload("res://addons/rl_sync/json_actions.gd")
const PackedActions = preload("res://addons/rl_sync/packed_actions.gd")
const AgentCalls = preload("res://addons/rl_sync/agent_calls.gd")
const SessionStats = preload("res://addons/rl_sync/session_stats.gd")
const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")
const SceneCopies = preload("res://addons/rl_sync/scene_copies.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")
const FragmentMode = preload("res://addons/rl_sync/fragment_mode.gd")
const Result = preload("res://addons/rl_sync/result.gd")

var stream: StreamPeerTCP = null
var handshake: TrainerHandshake

# The RLSync node: its env_name and decision_step(). A Node, so holding it makes no reference cycle.
var _sync: Node
# RLSync's own arrays (shared, not copied), so the hot path reads no property of another object.
var _agents: Array
var _action_spaces: Array
var _json_actions: JsonActions
var _packed_actions: PackedActions
var _calls: AgentCalls
var _stats := SessionStats.new()
# The handshake's encodings as flags, for the hot path.
var _packed_obs := false
var _binary := false
var _awaiting_action_reply := false
# The reply goes in the action's kind: a packed action gets a packed reply, a JSON one a JSON reply.
var _packed_reply := false
# An action message holds a bracket or two per agent and action key; eight times that is room enough.
var _max_brackets := 0
# Each agent's observation size as env_info declared it, and their sum (DecisionStep.packed() checks
# the observations against them); empty until env_info, or when an agent declares none readable.
var _declared := PoolIntArray()
var _declared_total := 0
# A reset of a game with cameras replies a frame later, once the reset's transforms have reached the
# VisualServer (camera_frames.gd): the reply is due at the next step().
var _reset_due := false


func _init(sync_node: Node) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_action_spaces = sync_node.action_spaces
	var keys := 0
	for space in _action_spaces:
		keys += space.size()
	_max_brackets = Wire.DEFAULT_MAX_BRACKETS + 8 * (_agents.size() + keys)
	handshake = TrainerHandshake.new(sync_node.env_name, _agents.size(), _max_brackets)
	_json_actions = JsonActions.new(_agents, _action_spaces)
	_packed_actions = PackedActions.new(_agents, _action_spaces)
	_calls = AgentCalls.new(_agents)


# Connects and waits for the handshake (see TrainerHandshake.connect_to_trainer()).
func connect_to_trainer(port: int, timeout_s: float, token: String) -> Reference:
	var connected: Reference = handshake.connect_to_trainer(port, timeout_s, token)
	stream = handshake.stream
	_read_encodings()
	return connected


# The editor's Play: one try, no token (see TrainerHandshake.try_connect()).
func try_connect(port: int, timeout_s: float) -> Reference:
	var connected: Reference = handshake.try_connect(port, timeout_s)
	stream = handshake.stream
	_read_encodings()
	return connected


func close() -> void:
	if stream != null:
		stream.disconnect_from_host()


# One decision step: reply to the last action with the step's results, then answer requests until
# the next action arrives, which this applies (it moves the agents this physics frame).
func step() -> Reference:
	var start := OS.get_ticks_usec()
	if _reset_due:
		_reset_due = false
		if _send(DecisionStep.reset_reply(_agents, _packed_obs)) != OK:
			return Result.disconnected()
	elif _awaiting_action_reply:
		_awaiting_action_reply = false
		var packet: PoolByteArray
		if _packed_reply:
			var packed := []
			var wrong: String = _sync.decision_step_packed(packed, _declared, _declared_total)
			if wrong != "":  # a bug of the game's own
				return _failed(wrong)
			packet = Wire.packed_step_frame(packed[0], packed[1], packed[2])
		else:
			packet = Wire.frame(Wire.step_json(_sync.decision_step(), _packed_obs))
		var problem := CameraFrames.problem() + SceneCopies.problem()  # a camera's or a copy's (see each)
		if problem == "" and packet.size() - 4 > Wire.MAX_MESSAGE_BYTES:  # every step's would be: nothing to restart
			problem = Wire.TOO_LARGE % [packet.size() - 4, Wire.MAX_MESSAGE_BYTES]
		if problem != "":  # the trainer hears it instead of the reply
			return _failed(problem)
		if stream.put_data(packet) != OK:
			return Result.disconnected()
	var sent := OS.get_ticks_usec()
	while true:
		# Blocks (in poll(), woken by the data) until the trainer's next message begins.
		var length := Wire.read_length(stream)
		var arrived := OS.get_ticks_usec()
		var read: Reference = Wire.read_body(stream, length, _max_brackets, _binary)
		read = FragmentMode.route(_sync, read)  # actor mode's weights; any other message leaves actor mode
		if not read.goes_on():
			return read
		var message = read.value
		var error := ""
		if typeof(message) == TYPE_RAW_ARRAY:  # the binary step exchange's actions
			var decoded := OS.get_ticks_usec()
			error = _packed_actions.apply(message)
			_awaiting_action_reply = error == ""
			_packed_reply = true
			_stats.count_step(start, sent, arrived, decoded)
			return read if error == "" else Result.failed(error)  # the read's GO_ON: one Result per step
		match message[Contract.TYPE_KEY]:
			Contract.MSG_ACTION:
				var decoded := OS.get_ticks_usec()
				error = _json_actions.apply(message)
				_awaiting_action_reply = error == ""
				_packed_reply = false
				_stats.count_step(start, sent, arrived, decoded)
				return read if error == "" else Result.failed(error)
		var answered: Reference = _answer(message)
		if answered.kind != Result.Kind.GO_ON:  # WAIT: the frame goes back to the game; the rest end the run
			return answered
	return Result.go_on()


# Answers a message that is not an action; GO_ON to read the next one.
func _answer(message: Dictionary) -> Reference:
	match message[Contract.TYPE_KEY]:
		Contract.MSG_RESET:
			return _reset()
		Contract.MSG_ENV_INFO:
			var problem := DecisionStep.non_number(_agents)
			if problem != "":  # a bug of the game's own
				return _failed(problem)
			if _send(_env_info()) != OK:
				return Result.disconnected()
		Contract.MSG_CALL:
			var returns: Reference = _calls.call_agents(str(message.get("method", "")), message)
			if not returns.goes_on():
				return returns
			if _send({Contract.TYPE_KEY: Contract.MSG_CALL, "returns": returns.value}) != OK:
				return Result.disconnected()
		Contract.MSG_CLOSE: return Result.closed()
		Contract.MSG_DRIVERS: return preload("res://addons/rl_sync/driver_message.gd").answer(_sync, stream, message)  # our extension
		Contract.MSG_ACTORS, Contract.MSG_FRAGMENT: return FragmentMode.answer(_sync, stream, message)  # our extension, in-engine actors
		Contract.MSG_HANDSHAKE:
			var checked: Reference = handshake.check(message)
			_read_encodings()
			return checked
		Contract.MSG_STATS:
			if _send(_stats.reply()) != OK:
				return Result.disconnected()
		Contract.MSG_ENV_PARAMS:  # our extension: values for each agent's next episode (env_params.gd)
			var error: String = _sync.env_params.apply_message(message)
			if error != "":
				return Result.failed(error)
			if _send({Contract.TYPE_KEY: Contract.MSG_ENV_PARAMS}) != OK:
				return Result.disconnected()
		_:
			return Result.failed("unknown message type '%s' (expected handshake, env_info, reset, action, call, stats, env_params, drivers, actors, fragment or close)"
					% str(message[Contract.TYPE_KEY]))
	return Result.go_on()


# Starts a new episode for every agent and replies with their first observations. With cameras the
# tree stays paused for a frame (step_order.gd) and the reply goes in the next one, drawn from the reset
# state (WAIT); a headless build refuses here, as the trainer asks for the first frames.
func _reset() -> Reference:
	for agent in _agents:
		agent.begin_episode()
	if not CameraFrames.any(_sync.get_tree()):
		return Result.disconnected() if _send(DecisionStep.reset_reply(_agents, _packed_obs)) != OK else Result.go_on()
	var refusal := CameraFrames.refusal(_sync.get_tree())
	if refusal != "":
		return _failed(refusal)
	_reset_due = true
	_sync.order.settle(_sync.get_tree())
	return Result.wait()


func _env_info() -> Dictionary:
	var obs_spaces := []
	var policy_names := []
	var teams := []
	_declared = PoolIntArray()
	_declared_total = 0
	var readable := true
	for agent in _agents:
		obs_spaces.append(agent.get_obs_space())
		policy_names.append(agent.policy_name)
		teams.append(agent.team)
		var size := DecisionStep.declared_size(agent)
		readable = readable and size >= 0
		_declared.append(size)
		_declared_total += size
	if not readable:
		_declared = PoolIntArray()
	return preload("res://addons/rl_sync/env_info_extras.gd").add_to(_sync, {  # + arenas, decision rate
		Contract.TYPE_KEY: Contract.MSG_ENV_INFO,
		"n_agents": _agents.size(),
		"observation_space": obs_spaces,
		"action_space": _action_spaces,
		"agent_policy_names": policy_names,
		"agent_teams": teams,  # our extension: each agent's side (-1: none), for self-play
		"env": _sync.env_name,
		"max_episode_steps": _agents[0].max_episode_steps,
		Contract.EXTENSION_KEY: TrainerHandshake.EXTENSION_VERSION,
		"obs_encoding": handshake.obs_encoding,
		"step_encoding": handshake.step_encoding,
		"env_params": _sync.env_params.declared,  # our extension: name -> {"default", "min", "max"}
		"agents_from_flag": ArenaGrid.agents_from_flag(),  # our extension: --agents sets the count
		"copies": SceneCopies.report(_sync),  # our extension: the scene's copies and what copies_check.gd found
	})


func _read_encodings() -> void:
	_packed_obs = handshake.obs_encoding == Contract.PACKED_OBS_ENCODING
	_binary = handshake.step_encoding == Contract.BINARY_STEP_ENCODING


func _send(message: Dictionary) -> int:
	return Wire.write_message(stream, to_json(message))


# Says a bug of the game's own to the trainer (which restarts nothing), and ends the run with it.
func _failed(problem: String) -> Reference:
	_send({Contract.TYPE_KEY: Contract.MSG_ERROR, "message": problem})
	return Result.failed(problem)
