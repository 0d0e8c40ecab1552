extends "res://tests/test_case.gd"
# A camera policy (conv_network.gd) in the policy set: it reads an agent's get_obs() Dictionary, the
# same as a flat row (--policy_forward); its frame stack is per agent and starts over at reset(); it
# fits only agents whose camera has its key and size. (Parity with torch: tests/test_cnn_playback.py.)

const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")

const SPACE := {"move": {"size": 2, "action_type": "continuous"}}
const IMAGE := {"key": "camera_2d", "size": [10, 10, 3]}


static func _random(rng: RandomNumberGenerator, shape: Array):
	var values := []
	for _i in range(shape[0]):
		values.append(rng.randf_range(-0.5, 0.5) if shape.size() == 1 else _random(rng, shape.slice(1, shape.size() - 1)))
	return values


# 10 x 10 RGB, 2 frames: conv 4x4 stride 3 to 2 channels (3 x 3), dense 18 -> 4, then 4 + 2 -> 2.
static func camera_policy() -> String:
	var rng := RandomNumberGenerator.new()
	rng.seed = 7
	return to_json({
		"format": "godot-ppo-policy", "version": 4, "env": "forager", "observation_size": 2,
		"image": {"key": "camera_2d", "size": [10, 10, 3], "frame_stack": 2},
		"action_keys": [{"key": "move", "action_type": "continuous", "size": 2}],
		"action_rule": "clipped_mean", "obs_normalization": null,
		"cnn": {"convs": [{"weight": _random(rng, [2, 6, 4, 4]), "bias": _random(rng, [2]), "kernel": 4, "stride": 3}],
				"dense": {"weight": _random(rng, [4, 18]), "bias": _random(rng, [4]), "activation": "relu"}},
		"layers": [{"weight": _random(rng, [2, 6]), "bias": _random(rng, [2]), "activation": "tanh"}],
	})


func _policy_set(images: Array) -> PolicySet:
	var specs := []
	for image in images:
		specs.append({"label": "agent %d" % specs.size(), "policy": "shared_policy", "obs_size": 2,
				"action_space": SPACE, "image": image})
	return PolicySet.new("forager", specs)


static func _frame(seed_value: int) -> PoolByteArray:
	var rng := RandomNumberGenerator.new()
	rng.seed = seed_value
	var frame := PoolByteArray()
	for _i in range(300):
		frame.append(rng.randi() % 256)
	return frame


func test_an_agents_observation_and_a_flat_row_give_the_same_outputs() -> void:
	var policies := _policy_set([IMAGE, IMAGE])
	check_eq(policies.load_files(["p.json"], {"p.json": camera_policy()}), "", "load error")
	check(policies.sees(0), "a camera policy reads the agent's own observation")
	var obs := {"obs": [0.5, -0.25], "camera_2d": _frame(1)}
	var first: Array = policies.act(obs, 0)["move"]
	var runner := PolicyRunner.new()
	check_eq(runner.load_text(camera_policy()), "", "runner load error")
	runner.set_agent_count(1)
	var row := [0.5, -0.25] + Array(_frame(1))
	check_eq(runner.act(row, 0)["move"], first, "the flat row of --policy_forward")
	check(first != policies.act({"obs": [0.5, -0.25], "camera_2d": _frame(2)}, 1)["move"], "another frame acts otherwise")


func test_the_frame_stack_is_per_agent_and_starts_over_at_reset() -> void:
	var policies := _policy_set([IMAGE, IMAGE])
	check_eq(policies.load_files(["p.json"], {"p.json": camera_policy()}), "", "load error")
	var obs := {"obs": [0.0, 1.0], "camera_2d": _frame(3)}
	var first: Array = policies.act(obs, 0)["move"]
	var second: Array = policies.act(obs, 0)["move"]
	check(first != second, "the second step sees the frame twice: %s, %s" % [first, second])
	check_eq(policies.act(obs, 1)["move"], first, "agent 1's stack is its own")
	policies.reset(0)
	check_eq(policies.act(obs, 0)["move"], first, "after a reset the older frame is zeros again")


func test_it_fits_only_agents_with_its_camera() -> void:
	var cases := {
		"another size": [{"key": "camera_2d", "size": [12, 10, 3]}, "the agent's camera gives \"camera_2d\" of 12 x 10 x 3"],
		"no camera": [{}, "it sees \"camera_2d\" of 10 x 10 x 3, the agent's camera gives none"],
	}
	for what in cases:
		var error := _policy_set([IMAGE, cases[what][0]]).load_files(["p.json"], {"p.json": camera_policy()})
		check(cases[what][1] in error and "agent 1" in error, "%s: %s" % [what, error])
	var bad: Dictionary = parse_json(camera_policy())
	bad["cnn"]["convs"][0]["kernel"] = 3
	var error := _policy_set([IMAGE]).load_files(["p.json"], {"p.json": to_json(bad)})
	check("convolution 0's weight must be 2 x 6 x 3 x 3 values" in error, error)
	bad["version"] = 3
	error = _policy_set([IMAGE]).load_files(["p.json"], {"p.json": to_json(bad)})
	check("a camera policy (\"image\", \"cnn\") needs version 4" in error, error)
