extends "res://tests/sync_test_case.gd"
# The binary step exchange ("step_encoding": "binary"): the packed bytes of wire.gd, the packed
# decision step of sync.gd (decision_step.gd), the packed action checks of packed_actions.gd and the
# session's handshake, without a socket.


func _peer(bytes: PoolByteArray) -> StreamPeerBuffer:
	var buffer := StreamPeerBuffer.new()
	buffer.data_array = bytes
	return buffer


func _framed(body: PoolByteArray) -> PoolByteArray:
	var n := body.size()
	var packet := PoolByteArray([n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])
	packet.append_array(body)
	return packet


func test_packed_actions_are_var2bytes_of_pool_arrays() -> void:
	var floats := PoolRealArray([0.5, -1.0, 0.25])
	var ints := PoolIntArray([2, 0])
	var body := Wire.pack_actions(floats, ints)
	# float32 array: type 22, count 3, then 0.5 = 0x3F000000, -1.0 = 0xBF800000, 0.25 = 0x3E800000
	check_eq(body.subarray(0, 19).hex_encode(), "16000000030000000000003f000080bf0000803e",
			"the float32 array's bytes")
	# int32 array: type 21, count 2, then 2 and 0
	check_eq(body.subarray(20, 35).hex_encode(), "15000000020000000200000000000000", "the int32 array's bytes")
	check(Wire.is_packed(body), "a packed body is recognised")
	check(not Wire.is_packed("{\"type\":\"action\"}".to_utf8()), "a JSON body is not packed")
	var read: Reference = Wire.unpack_actions(body, 3, 2)
	check_eq(read.kind, Result.Kind.GO_ON, "unpacked: %s" % read.message)
	var unpacked: Array = read.value
	check(unpacked[0] == floats, "the floats come back: %s" % str(unpacked[0]))
	check(unpacked[1] == ints, "the ints come back: %s" % str(unpacked[1]))
	var only_ints: Array = Wire.unpack_actions(Wire.pack_actions(PoolRealArray(), ints), 0, 2).value
	check(only_ints[1] == ints and only_ints[0].size() == 0, "a space of discrete keys only sends the int32 array")
	var only_floats: Array = Wire.unpack_actions(var2bytes(floats), 3, 0).value
	check(only_floats[0] == floats and only_floats[1].size() == 0, "continuous keys only: the float32 array")


func test_packed_actions_of_the_wrong_length_or_kind_are_refused() -> void:
	var body := Wire.pack_actions(PoolRealArray([0.5, -1.0, 0.25]), PoolIntArray())
	check_eq(Wire.unpack_actions(body, 4, 0).message,
			"a packed action message of 20 bytes; this game expects 24 (4 float32 values for continuous keys, 0 int32 values for discrete keys, each array after an 8-byte header)",
			"one value short")
	check_eq(Wire.unpack_actions(var2bytes(PoolIntArray([1, 2, 3])), 3, 0).message,
			"packed actions at byte 0: expected the header of 3 float32 values (type 22), got type 21 with 3 values",
			"int32 values where float32 ones belong")
	# Right length, but the header claims another count: refused before bytes2var sees it.
	var lying := var2bytes(PoolRealArray([1.0, 2.0]))
	lying[4] = 200
	check_eq(Wire.unpack_actions(lying, 2, 0).kind, Result.Kind.FAILED, "a lying header is a failure")
	check_eq(Wire.unpack_actions(lying, 2, 0).message,
			"packed actions at byte 0: expected the header of 2 float32 values (type 22), got type 22 with 200 values",
			"a header that disagrees with the length")


func test_packed_bodies_are_returned_only_once_asked_for() -> void:
	var body := var2bytes(PoolRealArray([1.0, 2.0]))
	var refused: Reference = Wire.read_message(_peer(_framed(body)))
	check_eq(refused.kind, Result.Kind.FAILED, "refused")
	check_eq(refused.message, "a packed (binary) message of 16 bytes, but the handshake did not ask for the step encoding \"binary\"",
			"without the binary step encoding")
	var accepted: Reference = Wire.read_message(_peer(_framed(body)), Wire.DEFAULT_MAX_BRACKETS, true)
	check(accepted.kind == Result.Kind.GO_ON and typeof(accepted.value) == TYPE_RAW_ARRAY and accepted.value == body,
			"with it, the body as it came")
	var json: Reference = Wire.read_message(_peer(Wire.frame("{\"type\":\"reset\"}")), Wire.DEFAULT_MAX_BRACKETS, true)
	check_eq(json.value, {"type": "reset"}, "JSON still parses when packed bodies are allowed")


func test_packed_step_frame_layout() -> void:
	var values := PoolRealArray([0.5, 1.0, 2.0])
	var frame := Wire.packed_step_frame(values, {})
	check_eq(frame.size(), 4 + 8 + 12, "prefix, header, three float32 values")
	check_eq(frame.subarray(0, 11).hex_encode(), "1400000016000000" + "03000000", "length 20, type 22, count 3")
	check(bytes2var(frame.subarray(4, frame.size() - 1)) == values, "the body is var2bytes of the values")
	var with_info := Wire.packed_step_frame(values, {"1": {"fruits": 2}})
	var tail := with_info.subarray(4 + 8 + 12, with_info.size() - 1).get_string_from_utf8()
	check_eq(JSON.parse(tail).result, {"info": {"1": {"fruits": 2.0}}}, "the infos as JSON after the values")
	check_eq(with_info.size() - 4, 20 + tail.to_utf8().size(), "the length prefix counts the JSON too")


func test_packed_decision_step_matches_the_json_one() -> void:
	_setup(3, 4)
	var twins := []
	for _i in range(3):
		var agent = FakeAgent.new()
		agent.max_episode_steps = 4
		agent.begin_episode()
		twins.append(agent)
	var json_sync = Sync.new()
	json_sync.agents = twins
	for step in range(5):
		for group in [agents, twins]:
			group[0].reward = 0.25 * step
			group[1].position = step + 0.5
			group[2].position = -step
			group[1].done = step == 2
			group[1].info["fruits"] = step
		var packed := []
		check_eq(sync.decision_step_packed(packed), "", "step %d is packed" % step)
		var reply: Dictionary = json_sync.decision_step()
		var values: PoolRealArray = packed[0]
		var expected := PoolRealArray()
		for obs in reply["obs"]:
			expected.append_array(obs["obs"])
		var terminal := PoolRealArray()
		var infos := {}
		for i in range(3):
			expected.append(reply["reward"][i])
		for i in range(3):
			var status := Wire.STATUS_RUNNING
			if reply["done"][i]:
				var info: Dictionary = reply["info"][i].duplicate()
				status = Wire.STATUS_TRUNCATED if info["TimeLimit.truncated"] else Wire.STATUS_TERMINATED
				terminal.append_array(info["terminal_observation"]["obs"])
				info.erase("terminal_observation")
				info.erase("TimeLimit.truncated")
				if not info.empty():
					infos[str(i)] = info
			expected.append(status)
		expected.append_array(terminal)
		check(values == expected, "step %d: packed %s, JSON %s" % [step, str(values), str(expected)])
		check_eq(packed[1], infos, "step %d: infos of the ended agents" % step)
		for i in range(3):
			check_eq(agents[i].n_steps, twins[i].n_steps, "step %d: agent %d's step counter" % [step, i])
			check_eq(agents[i].last_episode_return, twins[i].last_episode_return, "step %d: return" % step)
	# Step 2 ends agent 1 (terminated, with its info) and step 3 (the 4th) truncates agents 0 and 2.
	for twin in twins:
		twin.free()
	json_sync.free()


func test_packed_statuses_and_infos() -> void:
	_setup(2, 2)
	agents[0].info["fruits"] = 3
	agents[0].done = true
	agents[0].position = 4.0
	var packed := []
	check_eq(sync.decision_step_packed(packed), "", "the first step is packed")
	# obs [0, 2] (agent 0 reset) and [0, 1]; rewards 0, 0; statuses 1, 0; terminal obs of agent 0 [4, 1]
	check(packed[0] == PoolRealArray([0.0, 2.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 4.0, 1.0]), "values: %s" % str(packed[0]))
	check_eq(packed[1], {"0": {"fruits": 3}}, "the ended agent's info, copied before its reset")
	check_eq(agents[0].info, {}, "the controller's own dictionary was cleared by its reset, not the copy")
	packed = []
	check_eq(sync.decision_step_packed(packed), "", "the second step is packed")
	# agent 1 reaches its time limit (2 steps): truncated, and its info is empty so none is sent
	check(packed[0] == PoolRealArray([0.0, 2.0, 0.0, 2.0, 0.0, 0.0, 0.0, 2.0, 0.0, 1.0]), "values: %s" % str(packed[0]))
	check_eq(packed[1], {}, "no info when the ended agent's get_info() is empty")


func test_packed_actions_are_checked_before_any_agent_moves() -> void:
	_setup(2, 10)
	var actions = PackedActions.new(sync.agents, sync.action_spaces)
	# The fake agent's space is {"move": 2 continuous, "jump": 3 discrete}: sorted, "jump" comes first
	# but it is the only discrete key, so floats hold move, ints hold jump.
	var good := Wire.pack_actions(PoolRealArray([0.5, -0.5, 1.0, 0.25]), PoolIntArray([2, 0]))
	check_eq(actions.apply(good), "", "a good message")
	check_eq(agents[0].last_action, {"jump": 2, "move": [0.5, -0.5]}, "agent 0's action")
	check_eq(agents[1].last_action, {"jump": 0, "move": [1.0, 0.25]}, "agent 1's action")
	check_eq(typeof(agents[0].last_action["jump"]), TYPE_INT, "a discrete value is an int, as in the JSON path")
	agents[0].last_action = {}
	agents[1].last_action = {}
	var nan_bytes := Wire.pack_actions(PoolRealArray([0.5, -0.5, NAN, 0.25]), PoolIntArray([2, 0]))
	check_eq(actions.apply(nan_bytes),
			"the action for agent 1 is invalid: 'move' holds nan, which is not a finite number", "NaN")
	var inf_bytes := Wire.pack_actions(PoolRealArray([INF, -0.5, 0.0, 0.25]), PoolIntArray([2, 0]))
	check_eq(actions.apply(inf_bytes),
			"the action for agent 0 is invalid: 'move' holds inf, which is not a finite number", "infinity")
	var out_of_range := Wire.pack_actions(PoolRealArray([0.5, -0.5, 1.0, 0.25]), PoolIntArray([2, 3]))
	check_eq(actions.apply(out_of_range),
			"the action for agent 1 is invalid: 'jump' must be an integer in [0, 3), got 3", "discrete out of range")
	var negative := Wire.pack_actions(PoolRealArray([0.5, -0.5, 1.0, 0.25]), PoolIntArray([-1, 0]))
	check_eq(actions.apply(negative),
			"the action for agent 0 is invalid: 'jump' must be an integer in [0, 3), got -1", "negative discrete")
	var short := Wire.pack_actions(PoolRealArray([0.5, -0.5, 1.0]), PoolIntArray([2, 0]))
	check(actions.apply(short).begins_with("a packed action message of 36 bytes; this game expects 40"),
			"one value short")
	check_eq(agents[0].last_action, {}, "no agent moved on a bad message")
	check_eq(agents[1].last_action, {}, "no agent moved on a bad message")


func test_the_handshake_negotiates_the_step_encoding() -> void:
	_setup(1, 10)
	var session = TrainerSession.new(sync)
	# A handshake the session answers (as it does one sent mid-session), without a socket.
	var handshake := {"type": "handshake", "major_version": "0", "minor_version": "7"}
	check_eq(session._answer(handshake).kind, Result.Kind.GO_ON, "godot-rl's handshake")
	check_eq(session.handshake.step_encoding, "json", "godot-rl asks for nothing and gets JSON")
	check(not session._binary, "no packed bodies accepted")
	handshake["step_encoding"] = "binary"
	check_eq(session._answer(handshake).kind, Result.Kind.GO_ON, "ours")
	check_eq(session.handshake.step_encoding, "binary", "binary in force")
	check(session._binary, "packed bodies accepted")
	handshake["step_encoding"] = "msgpack"
	check_eq(session._answer(handshake).message,
			"the trainer asked for the step encoding 'msgpack'; this game knows [json, binary]", "an unknown encoding")


func test_sorted_action_spec() -> void:
	var space := {"b": {"size": 2, "action_type": "continuous"}, "a": {"size": 3, "action_type": "discrete"}}
	check_eq(PackedActions.sorted_action_spec(space), [["a", 3, true], ["b", 2, false]], "keys sorted")
