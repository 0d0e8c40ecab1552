extends Reference
# How a trainer's session (--port) begins: connecting to the trainer, our hello, and its handshake,
# which settles the protocol version and the encodings. A handshake may come again later in the
# session: check() answers both. Nothing here quits or prints: each step returns a Result (result.gd).

const Contract = preload("res://addons/rl_sync/contract.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# godot-rl 0.8's client sends handshake version 0.7; any 0.x is accepted.
const MAJOR_VERSION := Contract.MAJOR_VERSION
# Version of our extensions (hello message, terminal observations, TimeLimit.truncated, stats,
# packed observations).
const EXTENSION_VERSION := Contract.EXTENSION_VERSION
# Observation encodings a trainer may ask for in its handshake ("obs_encoding"); godot-rl asks for
# none and gets godot-rl's JSON lists.
const OBS_ENCODINGS := Contract.OBS_ENCODINGS
# Step encodings ("step_encoding" in the handshake): godot-rl's JSON, or our binary step exchange
# (packed actions in, one packed block of observations, rewards and statuses out; see wire.gd).
const STEP_ENCODINGS := Contract.STEP_ENCODINGS
# The type of the message a trainer answers our hello with when it trains another game
# (python_trainer/envs/editor.py, BusyPort): _greet() then returns Result.busy().
const BUSY_TYPE := Contract.MSG_BUSY

var stream: StreamPeerTCP = null
var obs_encoding: String = Contract.JSON_ENCODING
var step_encoding: String = Contract.JSON_ENCODING

# What our hello tells the trainer about the game.
var _env_name := ""
var _n_agents := 0
# The bound on a message's brackets (see Wire.parse_message).
var _max_brackets := 0


func _init(env_name: String, n_agents: int, max_brackets: int) -> void:
	_env_name = env_name
	_n_agents = n_agents
	_max_brackets = max_brackets


# Keeps retrying until the deadline: godot-rl's client starts the game before it binds its port.
# `token` (--token, may be empty) goes into our hello. GO_ON once the handshake is accepted.
func connect_to_trainer(port: int, timeout_s: float, token: String) -> Reference:
	var deadline := OS.get_ticks_msec() + int(timeout_s * 1000)
	while OS.get_ticks_msec() < deadline:
		if _open(port, deadline):
			return _greet(port, deadline, token)
		OS.delay_msec(100)
	return Result.failed("no trainer accepted a connection on 127.0.0.1:%d within %.0f s; quitting" % [port, timeout_s])


# One try, with no token, all within timeout_s: the editor's Play (a trainer listens on the port
# now, or not at all; on 127.0.0.1 a refused connection fails at once). GO_ON once the handshake is
# accepted, BUSY when that trainer trains another game, else FAILED (or DISCONNECTED).
func try_connect(port: int, timeout_s: float) -> Reference:
	var deadline := OS.get_ticks_msec() + int(timeout_s * 1000)
	if not _open(port, deadline):
		return Result.failed("no trainer listens on 127.0.0.1:%d" % port)
	return _greet(port, deadline, "")


# Connects the stream to 127.0.0.1:port before the deadline; false when nothing accepted.
func _open(port: int, deadline: int) -> bool:
	stream = StreamPeerTCP.new()
	if stream.connect_to_host("127.0.0.1", port) == OK:
		while stream.get_status() == StreamPeerTCP.STATUS_CONNECTING and OS.get_ticks_msec() < deadline:
			OS.delay_msec(5)
		if stream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
			stream.set_no_delay(true)
			return true
	stream.disconnect_from_host()
	return false


# Sends our hello (only with --token, so godot-rl's client never sees it) and waits for the
# trainer's handshake, both bounded by the connect deadline: a listening socket that never accepts
# must not keep a headless instance alive.
func _greet(port: int, deadline: int, token: String) -> Reference:
	if token != "":
		var sent := Wire.write_message(stream, to_json({
			Contract.TYPE_KEY: Contract.MSG_HELLO,
			"token": token,
			"env": _env_name,
			"n_agents": _n_agents,
			"pid": OS.get_process_id(),
			"protocol": EXTENSION_VERSION,
		}))
		if sent != OK:
			return Result.disconnected()
	while stream.get_available_bytes() < 4:
		if stream.get_status() != StreamPeerTCP.STATUS_CONNECTED:
			return Result.failed("the trainer closed the connection before its handshake (a wrong --token?); quitting")
		if OS.get_ticks_msec() >= deadline:
			return Result.failed("connected, but the trainer sent no handshake in time; quitting")
		OS.delay_msec(2)
	var read: Reference = Wire.read_message(stream, _max_brackets)
	if not read.goes_on():
		return read
	var message: Dictionary = read.value
	if message[Contract.TYPE_KEY] == BUSY_TYPE:
		return Result.busy("the trainer on 127.0.0.1:%d is training another game" % port)
	if message[Contract.TYPE_KEY] != Contract.MSG_HANDSHAKE:
		return Result.failed("the first message must be a handshake, got '%s'" % str(message[Contract.TYPE_KEY]))
	return check(message)


# Accepts the trainer's protocol version and encodings (GO_ON), or says what is wrong (FAILED; nothing
# changes then).
func check(message: Dictionary) -> Reference:
	var major := str(message.get("major_version", "?"))
	if major != MAJOR_VERSION:
		return Result.failed("the trainer speaks protocol version %s.%s; this game speaks %s.x (godot-rl 0.8): update one side"
				% [major, str(message.get("minor_version", "?")), MAJOR_VERSION])
	var encoding := str(message.get("obs_encoding", Contract.JSON_ENCODING))
	if not encoding in OBS_ENCODINGS:
		return Result.failed("the trainer asked for the observation encoding '%s'; this game knows %s"
				% [encoding, str(OBS_ENCODINGS)])
	var steps := str(message.get("step_encoding", Contract.JSON_ENCODING))
	if not steps in STEP_ENCODINGS:
		return Result.failed("the trainer asked for the step encoding '%s'; this game knows %s" % [steps, str(STEP_ENCODINGS)])
	obs_encoding = encoding
	step_encoding = steps
	return Result.go_on()
