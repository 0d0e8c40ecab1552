extends Reference
# The bytes of godot-rl's wire protocol: framing, decoding and the hand-built step reply.
#
# A message is a 4-byte little-endian length, then that many bytes of UTF-8 JSON. Everything here is
# a static function on a StreamPeer, a PoolByteArray or plain values, so it needs no scene tree and a
# test can drive it through a StreamPeerBuffer. Nothing here quits or prints: errors come back as a
# String, for the caller to report (see trainer_session.gd).

# A length prefix above this is not godot-rl's protocol (an HTTP request, a stray client): refusing
# it keeps a bad peer from making the game allocate gigabytes.
const MAX_MESSAGE_BYTES := 64 * 1024 * 1024
# What read_message() returns when the peer is gone or the stream ends inside a message.
const DISCONNECTED := "the trainer disconnected; quitting"
# Brackets allowed in a message when the caller does not size the bound to its agents.
const DEFAULT_MAX_BRACKETS := 1024


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


# Reads one framed message: the parsed message (a Dictionary with a "type"), or a String saying what
# is wrong (DISCONNECTED when the peer is gone). Blocks until the whole message is there on a
# StreamPeerTCP. `max_brackets` bounds the brackets a message may hold (see parse_message).
static func read_message(peer: StreamPeer, max_brackets: int = DEFAULT_MAX_BRACKETS):
	var header: Array = peer.get_data(4)
	if header[0] != OK:
		return DISCONNECTED
	var b: PoolByteArray = header[1]
	var length := b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)
	if length <= 0 or length > MAX_MESSAGE_BYTES:
		return "a message announced %d bytes; the limit is %d (is the trainer speaking godot-rl's protocol?)" \
				% [length, MAX_MESSAGE_BYTES]
	var body: Array = peer.get_data(length)
	if body[0] != OK:
		return DISCONNECTED
	var text: String = body[1].get_string_from_utf8()
	if text.empty():  # Godot decodes invalid UTF-8 to nothing at all
		return "a message of %d bytes is not valid UTF-8 text (is the trainer speaking godot-rl's protocol?)" \
				% length
	return parse_message(text, max_brackets)


# The message in a frame's text: a Dictionary with a "type", or a String saying what is wrong.
# JSON.parse recurses once per nesting level and crashes the engine some 50,000 levels deep, so a
# message with more brackets than `max_brackets` (two native counts, cheap on every step) is refused
# before parsing.
static func parse_message(text: String, max_brackets: int = DEFAULT_MAX_BRACKETS):
	if text.count("[") + text.count("{") > max_brackets:
		return "a message holds more than %d brackets, far more than the game's messages need: %s" \
				% [max_brackets, preview(text)]
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		return "malformed JSON from the trainer (line %d: %s): %s" \
				% [parsed.error_line, parsed.error_string, preview(text)]
	if typeof(parsed.result) != TYPE_DICTIONARY or not parsed.result.has("type"):
		return "every message must be a JSON object with a \"type\"; got %s" % preview(text)
	return parsed.result


# The step reply, built by hand: str() of a PoolRealArray is already a JSON list of numbers and
# costs less than half of to_json() on the same data, and this runs every decision step.
# `step` is what RLSync.decision_step() returns; `packed`: the trainer asked for f32_base64.
static func step_json(step: Dictionary, packed: bool) -> String:
	var obs_json := ""
	if packed:
		obs_json = "\"obs_f32\":\"" + pack_obs(step["obs"]) + "\""
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


# Every agent's observation ([{"obs": [...]}, ...]), concatenated as little-endian float32 and
# base64-encoded. Packing and encoding are native calls, about 5x cheaper than text.
static func pack_obs(obs: Array) -> String:
	var packed := PoolRealArray()
	for agent_obs in obs:
		packed.append_array(PoolRealArray(agent_obs["obs"]))
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


# A value as it appears in an error message, cut to 120 characters.
static func preview(value) -> String:
	var text := to_json(value) if typeof(value) in [TYPE_ARRAY, TYPE_DICTIONARY] else str(value)
	return text if text.length() <= 120 else text.substr(0, 120) + "..."
