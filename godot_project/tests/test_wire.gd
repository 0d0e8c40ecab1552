extends "res://tests/test_case.gd"
# wire.gd without a scene tree or a socket: framing through a StreamPeerBuffer, decoding errors,
# the hand-built step reply and the packed observations.

const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")


# A buffer holding `bytes`, read from the start, as a socket would deliver them.
func _peer(bytes: PoolByteArray) -> StreamPeerBuffer:
	var buffer := StreamPeerBuffer.new()
	buffer.data_array = bytes
	return buffer


func _length_prefix(n: int) -> PoolByteArray:
	return PoolByteArray([n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])


func test_frames_round_trip_with_non_ascii_text() -> void:
	var buffer := StreamPeerBuffer.new()
	var first := {"type": "call", "method": "größe — 名前 🎯"}
	check_eq(Wire.write_message(buffer, to_json(first)), OK, "writing into a buffer")
	check_eq(Wire.write_message(buffer, to_json({"type": "close"})), OK, "a second message")
	var text: String = to_json(first)
	var body_size := text.to_utf8().size()
	check(body_size > text.length(), "the test text has multi-byte characters")
	var bytes := buffer.data_array
	check_eq(bytes.subarray(0, 3), _length_prefix(body_size), "the prefix is the UTF-8 byte length, little-endian")
	buffer.seek(0)
	check_eq(Wire.read_message(buffer).value, first, "the first message back")
	check_eq(Wire.read_message(buffer).value, {"type": "close"}, "the second message back")
	check_eq(Wire.read_message(buffer).kind, Result.Kind.DISCONNECTED, "the end of the stream reads as a disconnection")


func test_a_message_cut_short_reads_as_disconnection() -> void:
	var frame := Wire.frame("{\"type\":\"reset\"}")
	check_eq(Wire.read_message(_peer(frame.subarray(0, frame.size() - 3))).kind, Result.Kind.DISCONNECTED,
			"truncated body")


func test_a_disconnection_a_malformed_message_and_a_good_one_are_three_kinds() -> void:
	var good: Reference = Wire.read_message(_peer(Wire.frame("{\"type\":\"reset\"}")))
	check_eq([good.kind, good.value, good.message], [Result.Kind.GO_ON, {"type": "reset"}, ""], "a good message")
	check(good.goes_on() and not good.is_failure(), "a good message goes on")
	var malformed: Reference = Wire.read_message(_peer(Wire.frame("{\"type\": ")))
	check_eq([malformed.kind, malformed.value], [Result.Kind.FAILED, null], "a malformed message")
	check(malformed.message.begins_with("malformed JSON from the trainer"), "it says why: " + malformed.message)
	check(not malformed.goes_on() and malformed.is_failure(), "a malformed message ends the run as a failure")
	var gone: Reference = Wire.read_message(_peer(PoolByteArray()))
	check_eq([gone.kind, gone.value, gone.message], [Result.Kind.DISCONNECTED, null, Result.DISCONNECTED_TEXT],
			"an empty stream")
	check(not gone.goes_on() and not gone.is_failure(), "a disconnection ends the run, and is no failure of the game's")


func test_oversize_and_empty_lengths_are_refused() -> void:
	var over := Wire.MAX_MESSAGE_BYTES + 1
	var bytes := _length_prefix(over)
	bytes.append_array("{}".to_utf8())
	check_eq(Wire.read_message(_peer(bytes)).message,
			"a message announced %d bytes; the limit is %d (is the trainer speaking godot-rl's protocol?)"
			% [over, Wire.MAX_MESSAGE_BYTES], "a length over the limit")
	# "GET " of an HTTP request, read as a length: far over the limit, and no allocation of it.
	var http := "GET / HTTP/1.1\r\n\r\n".to_utf8()
	var error: String = Wire.read_message(_peer(http)).message
	check(error.begins_with("a message announced 542393671 bytes"), "an HTTP request is refused: " + error)
	check_eq(Wire.read_message(_peer(_length_prefix(0))).message,
			"a message announced 0 bytes; the limit is %d (is the trainer speaking godot-rl's protocol?)"
			% Wire.MAX_MESSAGE_BYTES, "an empty message")
	var limit := Wire.frame("{\"type\":\"reset\"}")
	check_eq(Wire.read_message(_peer(limit)).value, {"type": "reset"}, "a small message passes")


func test_malformed_json_is_explained() -> void:
	var parsed := JSON.parse("{\"type\": ")
	var expected := "malformed JSON from the trainer (line %d: %s): {\"type\": " \
			% [parsed.error_line, parsed.error_string]
	check_eq(Wire.read_message(_peer(Wire.frame("{\"type\": "))).message, expected, "malformed JSON")
	check_eq(Wire.parse_message("[1, 2]").message, "every message must be a JSON object with a \"type\"; got [1, 2]",
			"a list is not a message")
	check_eq(Wire.parse_message("{\"action\": []}").message,
			"every message must be a JSON object with a \"type\"; got {\"action\": []}", "a message needs a type")
	var long_text := "{\"type\": \"" + "x".repeat(200)
	var error: String = Wire.parse_message(long_text).message
	check(error.ends_with(long_text.substr(0, 120) + "..."), "the preview is cut to 120 characters: " + error)


func _step() -> Dictionary:
	return {
		"obs": [{"obs": [0.5, -1.0, 0.1]}, {"obs": [1e-7, 3.0, -0.25]}],
		"reward": [0.123456789, -0.000000123],
		"done": [false, true],
		"info": [{}, {"TimeLimit.truncated": true, "terminal_observation": {"obs": [2.0, 0.0, 1.0]}}],
	}


func test_step_reply_parses_back_with_the_right_values() -> void:
	var text := Wire.step_json(_step(), false)
	var parsed := JSON.parse(text)
	check_eq(parsed.error, OK, "the hand-built step reply parses as JSON: " + text)
	var reply: Dictionary = parsed.result
	check_eq(reply.keys(), ["type", "obs", "reward", "done", "info"], "keys in godot-rl's order")
	check_eq(reply["type"], "step", "type")
	check_eq(reply["obs"][0], {"obs": [0.5, -1.0, 0.1]}, "observations")
	check_eq(reply["done"], [false, true], "dones")
	check_eq(reply["info"][1]["TimeLimit.truncated"], true, "info")
	check_eq(reply["info"][1]["terminal_observation"], {"obs": [2.0, 0.0, 1.0]}, "terminal observation")
	check("\"reward\":[0.123456789,-0.000000123]" in text, "rewards with 9 decimals: " + text)
	check_eq(reply["reward"], [0.123456789, -0.000000123], "rewards parse back")


func test_packed_step_reply_decodes_to_the_same_float32_values() -> void:
	var step := _step()
	var text := Wire.step_json(step, true)
	var parsed := JSON.parse(text)
	check_eq(parsed.error, OK, "the packed step reply parses as JSON: " + text)
	var reply: Dictionary = parsed.result
	check_eq(reply.keys(), ["type", "obs_f32", "reward", "done", "info"], "obs_f32 in place of obs")
	var values := Wire.unpack_obs(reply["obs_f32"])
	# The float32 rounding of each value, as the trainer's numpy.frombuffer(dtype="<f4") sees it.
	var expected := PoolRealArray([0.5, -1.0, 0.1, 1e-7, 3.0, -0.25])
	check_eq(values.size(), 6, "one float per observation value")
	for i in range(expected.size()):
		check(values[i] == expected[i], "value %d: %s != %s" % [i, str(values[i]), str(expected[i])])
	check(abs(values[2] - 0.1) < 1e-8 and values[2] != 0.1, "0.1 comes back as its float32 rounding")
	var bytes := Marshalls.base64_to_raw(reply["obs_f32"])
	check_eq(bytes.subarray(0, 3), PoolByteArray([0, 0, 0, 0x3F]), "little-endian float32 of 0.5")
	check_eq(Wire.pack_obs([]), "", "no observations: an empty string")


func test_deeply_nested_json_is_refused_before_parsing() -> void:
	var deep := "{\"type\":\"call\",\"method\":" + "[".repeat(50000) + "]".repeat(50000) + "}"
	var result: Reference = Wire.parse_message(deep, 1000)
	check(result.is_failure() and "more than 1000 brackets" in result.message, "refused: %s" % Wire.preview(result.message))
	check_eq(Wire.parse_message("{\"type\":\"action\",\"action\":[{\"move\":[0,0]}]}", 4).value["type"], "action",
			"a message within the bound parses")


func test_invalid_utf8_is_named() -> void:
	var body := PoolByteArray([123, 34, 0xFF, 0xFE, 34, 125])
	var frame := _length_prefix(body.size())
	frame.append_array(body)
	var result: Reference = Wire.read_message(_peer(frame))
	check(result.is_failure() and "is not valid UTF-8" in result.message, "got %s" % result.message)
