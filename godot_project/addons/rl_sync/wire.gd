extends Reference
# The bytes of godot-rl's wire protocol: framing, decoding, the hand-built step reply and our binary
# step exchange. A message is a 4-byte little-endian length, then that many bytes of UTF-8 JSON, or, once the
# handshake asked for "step_encoding": "binary", packed numbers (see "The binary step exchange"). Everything here is
# a static function on a StreamPeer, a PoolByteArray or plain values, so it needs no scene tree and a
# test can drive it through a StreamPeerBuffer. Nothing here quits or prints: a read comes back as a
# Result (result.gd), for the caller to report (see trainer_session.gd).

const Contract = preload("res://addons/rl_sync/contract.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# A length prefix above this is not godot-rl's protocol (an HTTP request, a stray client): refusing
# it keeps a bad peer from making the game allocate gigabytes. A reply this large is not sent (TOO_LARGE).
const MAX_MESSAGE_BYTES := Contract.MAX_MESSAGE_BYTES
const TOO_LARGE := "a step's reply of %d bytes is over the %d-byte limit of one message: fewer agents per instance (--agents, --copies) or smaller camera images"
# Brackets allowed in a message when the caller does not size the bound to its agents.
const DEFAULT_MAX_BRACKETS := 1024
# A JSON step reply's beginning, {"type":"step", (step_json()).
const STEP_HEAD := "{\"" + Contract.TYPE_KEY + "\":\"" + Contract.MSG_STEP + "\","


# Frames by UTF-8 byte length (String.length() counts characters, which differ for non-ASCII text),
# header and body in one array so the caller sends them in one write.
static func frame(text: String) -> PoolByteArray:
	var body := text.to_utf8()
	var n := body.size()
	var packet := PoolByteArray([n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])
	packet.append_array(body)
	return packet


# Returns the peer's error code: anything but OK means the peer is gone.
static func write_message(peer: StreamPeer, text: String) -> int:
	return peer.put_data(frame(text))


# Reads one framed message: a Result, GO_ON with the parsed message (a Dictionary with a "type"),
# DISCONNECTED when the peer is gone, or FAILED. Blocks until the whole message is there on a
# StreamPeerTCP. `max_brackets` bounds the brackets a message may hold (see parse_message). With
# `packed_ok` (the handshake asked for the binary step encoding), a packed body comes back as it is,
# a PoolByteArray, for unpack_actions().
static func read_message(peer: StreamPeer, max_brackets: int = DEFAULT_MAX_BRACKETS, packed_ok: bool = false) -> Reference:
	return read_body(peer, read_length(peer), max_brackets, packed_ok)


# The first half of read_message(): the length prefix (-1 when the peer is gone). On a StreamPeerTCP
# this blocks in poll() until the bytes arrive, so the game wakes as soon as the trainer has written.
static func read_length(peer: StreamPeer) -> int:
	var header: Array = peer.get_data(4)
	if header[0] != OK:
		return -1
	var b: PoolByteArray = header[1]
	return b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)


# The second half of read_message(): the body of `length` bytes, decoded (a Result, as read_message's).
static func read_body(peer: StreamPeer, length: int, max_brackets: int = DEFAULT_MAX_BRACKETS,
		packed_ok: bool = false) -> Reference:
	if length < 0:
		return Result.disconnected()
	if length == 0 or length > MAX_MESSAGE_BYTES:
		return Result.failed("a message announced %d bytes; the limit is %d (is the trainer speaking godot-rl's protocol?)"
				% [length, MAX_MESSAGE_BYTES])
	var body: Array = peer.get_data(length)
	if body[0] != OK:
		return Result.disconnected()
	var bytes: PoolByteArray = body[1]
	if is_packed(bytes):
		if packed_ok:
			return Result.new(Result.Kind.GO_ON, bytes)  # new(), not go_on(): no load() on the hot path
		return Result.failed("a packed (binary) message of %d bytes, but the handshake did not ask for the step encoding \"binary\""
				% length)
	var text: String = bytes.get_string_from_utf8()
	if text.empty():  # Godot decodes invalid UTF-8 to nothing at all
		return Result.failed("a message of %d bytes is not valid UTF-8 text (is the trainer speaking godot-rl's protocol?)"
				% length)
	return parse_message(text, max_brackets)


# The message in a frame's text: a Result, GO_ON with a Dictionary with a "type", or FAILED.
# JSON.parse recurses once per nesting level and crashes the engine some 50,000 levels deep, so a
# message with more brackets than `max_brackets` (two native counts, cheap on every step) is refused
# before parsing.
static func parse_message(text: String, max_brackets: int = DEFAULT_MAX_BRACKETS) -> Reference:
	if text.count("[") + text.count("{") > max_brackets:
		return Result.failed("a message holds more than %d brackets, far more than the game's messages need: %s"
				% [max_brackets, preview(text)])
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		return Result.failed("malformed JSON from the trainer (line %d: %s): %s"
				% [parsed.error_line, parsed.error_string, preview(text)])
	if typeof(parsed.result) != TYPE_DICTIONARY or not parsed.result.has(Contract.TYPE_KEY):
		return Result.failed("every message must be a JSON object with a \"type\"; got %s" % preview(text))
	return Result.new(Result.Kind.GO_ON, parsed.result)


# The step reply, built by hand: str() of a PoolRealArray is already a JSON list of numbers and
# costs less than half of to_json() on the same data, and this runs every decision step.
# `step` is what RLSync.decision_step() returns; `packed`: the trainer asked for f32_base64. An agent's
# observation of other keys than "obs" (a camera's hex image beside its vector keys) goes by to_json().
static func step_json(step: Dictionary, packed: bool) -> String:
	var obs_json := ""
	if packed:
		obs_json = "\"obs_f32\":\"" + pack_obs(step["obs"]) + "\""
		var images := Observations.packed_images(step["obs"])
		if not images.empty():
			obs_json += ",\"obs\":" + to_json(images)
	else:
		var obs := PoolStringArray()
		for agent_obs in step["obs"]:
			if agent_obs.size() == 1 and agent_obs.has("obs"):
				obs.append("{\"obs\":" + str(PoolRealArray(agent_obs["obs"])) + "}")
			else:
				obs.append(to_json(agent_obs))
		obs_json = "\"obs\":[" + obs.join(",") + "]"
	# Rewards keep 9 decimals: small shaping terms would lose their digits in str()'s 6.
	var rewards := PoolStringArray()
	for reward in step["reward"]:
		rewards.append("%.9f" % reward)
	return STEP_HEAD + obs_json + ",\"reward\":[" \
			+ rewards.join(",") + "],\"done\":" + to_json(step["done"]) \
			+ ",\"info\":" + to_json(step["info"]) + "}"


# Every agent's observation ([{"obs": [...]}, ...]), concatenated as little-endian float32 and
# base64-encoded. Packing and encoding are native calls, about 5x cheaper than text. An observation
# of several keys packs its vector keys in sorted order (its image stays hex: packed_images()).
static func pack_obs(obs: Array) -> String:
	var packed := PoolRealArray()
	for agent_obs in obs:
		if agent_obs.size() == 1 and agent_obs.has("obs"):
			packed.append_array(PoolRealArray(agent_obs["obs"]))
		else:
			packed.append_array(Observations.vector_values(agent_obs))
	# var2bytes writes a 4-byte type and a 4-byte count before the floats.
	var bytes := var2bytes(packed)
	return Marshalls.raw_to_base64(bytes.subarray(8, bytes.size() - 1)) if packed.size() > 0 else ""


# The inverse of pack_obs() (for tests and tools; the trainer decodes in Python): the float32 values.
static func unpack_obs(text: String) -> PoolRealArray:
	var buffer := StreamPeerBuffer.new()
	buffer.data_array = Marshalls.base64_to_raw(text)
	var values := PoolRealArray()
	for _i in range(buffer.get_size() / 4):
		values.append(buffer.get_float())
	return values


# --- The binary step exchange ("step_encoding": "binary" in the handshake) -----------------------
#
# A packed body is laid out exactly as var2bytes() writes a pool array: a 4-byte little-endian type
# word (TYPE_REAL_ARRAY = 22: float32 values; TYPE_INT_ARRAY = 21: int32 values), a 4-byte count,
# then the values, little-endian. So bytes2var() reads it in one native call, and its first byte
# (0x15 or 0x16) can never be the "{" that starts a JSON body.
#   actions (trainer -> game): the float32 array of every continuous value (agents in order, each
#       agent's keys in sorted order), then the int32 array of every discrete value, in the same
#       order; an array with no values is left out (a space of one kind sends one array).
#   step reply (game -> trainer): one float32 array holding, for N agents, every agent's observation,
#       then N rewards, then N statuses (0: running, 1: terminated, 2: truncated by the time limit),
#       then the terminal observation of each agent whose episode ended, in agent order; and, only
#       then, only when an agent observes a camera, one byte array as var2bytes() writes a
#       PoolByteArray (type word 20, a 4-byte count, the bytes, zero padding to a multiple of 4): every
#       image agent's frame in agent order, then the terminal frame of each ended image agent, in the
#       order of the terminal observations; and, only when an ended agent's get_info() has keys, UTF-8
#       JSON after the arrays: {"info": {"<agent index>": {...}}}.
const PACKED_HEADER_BYTES := Contract.PACKED_HEADER_BYTES
const STATUS_RUNNING := Contract.STATUS_RUNNING
const STATUS_TERMINATED := Contract.STATUS_TERMINATED
const STATUS_TRUNCATED := Contract.STATUS_TRUNCATED


# A packed body starts with the type word of a PoolIntArray or PoolRealArray; a JSON body with "{".
static func is_packed(body: PoolByteArray) -> bool:
	return body.size() >= PACKED_HEADER_BYTES and (body[0] == Contract.POOL_REAL_ARRAY or body[0] == Contract.POOL_INT_ARRAY) \
			and body[1] == 0 and body[2] == 0 and body[3] == 0


# The packed actions in `body`: a Result, GO_ON with [PoolRealArray of n_floats values, PoolIntArray
# of n_ints values], or FAILED. The length and both headers are checked before bytes2var() runs, so
# a wrong message never reaches the decoder.
static func unpack_actions(body: PoolByteArray, n_floats: int, n_ints: int) -> Reference:
	var expected := 0
	if n_floats > 0:
		expected += PACKED_HEADER_BYTES + 4 * n_floats
	if n_ints > 0:
		expected += PACKED_HEADER_BYTES + 4 * n_ints
	if body.size() != expected:
		return Result.failed("a packed action message of %d bytes; this game expects %d (%d float32 values for continuous keys, %d int32 values for discrete keys, each array after an 8-byte header)"
				% [body.size(), expected, n_floats, n_ints])
	var floats := PoolRealArray()
	var ints := PoolIntArray()
	var at := 0
	if n_floats > 0:
		var error := _check_header(body, 0, Contract.POOL_REAL_ARRAY, n_floats, "float32")
		if error != "":
			return Result.failed(error)
		floats = bytes2var(body)  # the first array; bytes2var ignores what follows it
		at = PACKED_HEADER_BYTES + 4 * n_floats
	if n_ints > 0:
		var error := _check_header(body, at, Contract.POOL_INT_ARRAY, n_ints, "int32")
		if error != "":
			return Result.failed(error)
		ints = bytes2var(body if at == 0 else body.subarray(at, body.size() - 1))
	return Result.new(Result.Kind.GO_ON, [floats, ints])


static func _check_header(body: PoolByteArray, at: int, type: int, count: int, what: String) -> String:
	var found_type := _u32(body, at)
	var found_count := _u32(body, at + 4)
	if found_type != type or found_count != count:
		return "packed actions at byte %d: expected the header of %d %s values (type %d), got type %d with %d values" \
				% [at, count, what, type, found_type, found_count]
	return ""


static func _u32(bytes: PoolByteArray, at: int) -> int:
	return bytes[at] | (bytes[at + 1] << 8) | (bytes[at + 2] << 16) | (bytes[at + 3] << 24)


# The inverse of unpack_actions() (tests and tools; the trainer packs in Python).
static func pack_actions(floats: PoolRealArray, ints: PoolIntArray) -> PoolByteArray:
	var body := PoolByteArray()
	if floats.size() > 0:
		body.append_array(var2bytes(floats))
	if ints.size() > 0:
		body.append_array(var2bytes(ints))
	return body


# The framed step reply: `values` (see the layout above) as var2bytes() writes it, then the camera
# `frames` (null: none), then the JSON of `infos` ({"<agent index>": info}) when it is not empty.
# Header and body in one array.
static func packed_step_frame(values: PoolRealArray, infos: Dictionary, frames = null) -> PoolByteArray:
	var body := var2bytes(values)
	if frames != null:
		body.append_array(var2bytes(frames))
	if not infos.empty():
		body.append_array(to_json({"info": infos}).to_utf8())
	var n := body.size()
	var packet := PoolByteArray([n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])
	packet.append_array(body)
	return packet


# A value as it appears in an error message, cut to 120 characters.
static func preview(value) -> String:
	return Observations.preview(value)
