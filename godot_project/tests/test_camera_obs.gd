extends "res://tests/sync_test_case.gd"
# Camera observations on the wire (observations.gd, decision_step.gd, wire.gd): an image key's frame as
# lowercase hex in JSON, as one byte array after the float block in the binary step exchange; the
# sensors' size checks, and the headless build's refusal. Drawing needs a window: tests/test_forager.py.

const FakeCameraAgent = preload("res://tests/fake_camera_agent.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")
const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")
const CameraSensor3D = preload("res://addons/rl_sync/camera_sensor_3d.gd")
const CameraSensor2D = preload("res://addons/rl_sync/camera_sensor_2d.gd")

const FRAME_BYTES := 2 * 3 * 3


func _setup_cameras(n_agents: int, max_steps: int) -> void:
	sync = Sync.new()
	agents = []
	for _i in range(n_agents):
		var agent = FakeCameraAgent.new()
		agent.max_episode_steps = max_steps
		agent.begin_episode()
		agents.append(agent)
	sync.agents = agents
	for agent in agents:
		sync.action_spaces.append(agent.get_action_space())


func test_an_image_goes_as_lowercase_hex() -> void:
	var obs := Observations.json({"obs": [1.0], "camera_2d": PoolByteArray([0, 15, 171, 255])})
	check_eq(obs, {"obs": [1.0], "camera_2d": "000fabff"}, "the frame's bytes in hex")
	check_eq(Observations.json([0.5, 2.0]), {"obs": [0.5, 2.0]}, "an Array is the key \"obs\", as always")
	check(Observations.vector_values({"b": [2.0], "a_2d": PoolByteArray([9]), "a": [1.0]}) == PoolRealArray([1.0, 2.0]),
			"vector keys in sorted order, the image left out")


func test_json_step_carries_the_frames_and_the_terminal_frame() -> void:
	_setup_cameras(2, 10)
	agents[1].position = 3.0
	var ended_frame: String = agents[1].get_obs()["camera_2d"].hex_encode()
	agents[1].done = true
	var text := Wire.step_json(sync.decision_step(), false)
	var reply: Dictionary = JSON.parse(text).result
	check_eq(reply["obs"][0]["obs"], [0.0, 1.0], "agent 0's vector key")
	check_eq(reply["obs"][0]["camera_2d"], agents[0].get_obs()["camera_2d"].hex_encode(), "agent 0's frame")
	check_eq(reply["obs"][1]["camera_2d"].length(), 2 * FRAME_BYTES, "two hex digits a byte")
	check_eq(reply["info"][1]["terminal_observation"]["camera_2d"], ended_frame,
			"the terminal observation shows the ended episode's frame, taken before the reset")
	check(reply["obs"][1]["camera_2d"] != ended_frame, "the reply's frame is the new episode's")
	var packed: Dictionary = JSON.parse(Wire.step_json(sync.decision_step(), true)).result
	check_eq(Wire.unpack_obs(packed["obs_f32"]).size(), 4, "obs_f32: the vector keys only")
	check_eq(packed["obs"][0].keys(), ["camera_2d"], "beside obs_f32, the images in hex")


func test_vector_replies_are_unchanged() -> void:
	_setup(2, 10)
	var text := Wire.step_json(sync.decision_step(), false)
	check("\"obs\":[{\"obs\":[0, 1]},{\"obs\":[0, 1]}]" in text, "the hand-built vector reply: " + text)
	var packed: Dictionary = JSON.parse(Wire.step_json(sync.decision_step(), true)).result
	check(not packed.has("obs"), "no image list beside obs_f32 in a vector game")
	var arrays := []
	sync.decision_step_packed(arrays)
	check_eq(arrays[2], null, "no byte array in a vector game's packed step")


func test_packed_step_holds_one_byte_array_after_the_float_block() -> void:
	_setup_cameras(3, 10)
	agents[1].position = 2.0
	agents[2].position = 5.0
	var terminal: PoolByteArray = agents[2].get_obs()["camera_2d"]
	agents[2].done = true
	agents[2].info["fruits"] = 1
	var packed := []
	check_eq(sync.decision_step_packed(packed, PoolIntArray([2, 2, 2]), 6), "", "the declared sizes hold")
	var frame := Wire.packed_step_frame(packed[0], packed[1], packed[2])
	var body := frame.subarray(4, frame.size() - 1)
	var floats: PoolRealArray = bytes2var(body)
	# 3 x 2 vector values, 3 rewards, 3 statuses, agent 2's terminal vector [5, 1]
	check_eq(floats.size(), 3 * 2 + 3 + 3 + 2, "the float block holds the vector keys only")
	var at := 8 + 4 * floats.size()
	check_eq(body.subarray(at, at + 7).hex_encode(), "14000000" + "48000000", "type 20, then 4 x 18 bytes")
	var images := body.subarray(at + 8, at + 8 + 4 * FRAME_BYTES - 1)
	for i in range(3):
		check(images.subarray(i * FRAME_BYTES, (i + 1) * FRAME_BYTES - 1) == agents[i].get_obs()["camera_2d"],
				"agent %d's frame, in agent order" % i)
	check(images.subarray(3 * FRAME_BYTES, 4 * FRAME_BYTES - 1) == terminal, "then the ended agent's terminal frame")
	var tail := body.subarray(at + 8 + 4 * FRAME_BYTES, body.size() - 1).get_string_from_utf8()
	check_eq(JSON.parse(tail).result, {"info": {"2": {"fruits": 1.0}}}, "72 bytes need no padding; the info follows")
	var odd := Wire.packed_step_frame(PoolRealArray([1.0]), {}, PoolByteArray([1, 2, 3, 4, 5]))
	check_eq(odd.subarray(4 + 8 + 4, odd.size() - 1).hex_encode(), "14000000050000000102030405000000",
			"5 bytes, zero-padded to 8")


func test_reset_reply_in_both_encodings() -> void:
	_setup_cameras(2, 10)
	var json := DecisionStep.reset_reply(agents, false)
	check_eq(json["obs"][1]["camera_2d"], agents[1].get_obs()["camera_2d"].hex_encode(), "godot-rl's list, hex images")
	var packed := DecisionStep.reset_reply(agents, true)
	check(Wire.unpack_obs(packed["obs_f32"]) == PoolRealArray([0.0, 1.0, 0.0, 1.0]), "obs_f32: the vector keys")
	check_eq(packed["obs"][0], {"camera_2d": agents[0].get_obs()["camera_2d"].hex_encode()}, "the images beside")
	_setup(2, 10)
	check_eq(DecisionStep.reset_reply(agents, true).keys(), ["type", "obs_f32"], "a vector game's packed reset")


func test_unreadable_images_are_named() -> void:
	check_eq(Observations.problem({"obs": [1.0], "camera_2d": [1, 2]}),
			"get_obs()[\"camera_2d\"] is [1,2]: a key containing \"2d\" is an image, a camera sensor's get_frame() (a PoolByteArray)",
			"an image key holding a list")
	check_eq(Observations.problem({"a_2d": PoolByteArray(), "b_2d": PoolByteArray()}),
			"get_obs() holds 2 image keys (keys containing \"2d\"); an agent has one camera at most", "two cameras")
	check_eq(Observations.problem({"obs": ["x"], "camera_2d": PoolByteArray()}),
			"get_obs()[\"obs\"] holds x at index 0, not a number; an observation is a flat Array of numbers",
			"a vector key with a String")
	check_eq(Observations.problem({"obs": [1.0], "camera_2d": PoolByteArray([1])}), "", "a good observation")


func test_sensor_sizes_are_checked() -> void:
	var sensor = CameraSensor3D.new()
	check_eq(CameraFrames.size_problem(sensor), "", "36 x 36 by default")
	check_eq(sensor.obs_space(), {"size": [36, 36, 3], "space": "box"}, "declared as H, W, C")
	sensor.width = 0
	sensor.height = 0
	check("0 x 0 pixels; give a width and a height from 1 to 512" in CameraFrames.size_problem(sensor),
			"0 x 0: " + CameraFrames.size_problem(sensor))
	sensor.width = 513
	sensor.height = 20
	check("513 x 20 pixels" in CameraFrames.size_problem(sensor), "over 512")
	check("changed from 36 x 36 to 513 x 20 during the run" in CameraFrames.resized(sensor, Vector2(36, 36)),
			"a size that changes mid-run: " + CameraFrames.resized(sensor, Vector2(36, 36)))
	sensor.free()
	var flat = CameraSensor2D.new()
	flat.grayscale = true
	flat.height = 20
	check_eq(flat.obs_space(), {"size": [20, 36, 1], "space": "box"}, "grayscale: one channel")
	flat.free()


func test_headless_refuses_a_scene_with_cameras() -> void:
	check_eq(CameraFrames.refusal(tree), "", "no sensor: nothing to refuse")
	var node := Node.new()
	node.add_to_group(CameraFrames.GROUP)
	tree.root.add_child(node)
	check_eq(CameraFrames.refusal(tree), CameraFrames.HEADLESS, "the server build (these tests) renders nothing")
	check("run the windowed export" in CameraFrames.HEADLESS, "the fix is named")
	node.free()
