extends "res://tests/test_case.gd"
# policy_set.gd: each agent plays the network of its policy_name, a nameless file the rest; a
# recurrent network's state is per agent and per network.

const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const TestPolicyRunner = preload("res://tests/test_policy_runner.gd")

const SPACE := {"move": {"size": 2, "action_type": "continuous"}}


# A linear network of 4 observations whose first output is `bias` (whatever the observation is 0).
func _linear(name: String, bias: float) -> String:
	var policy := {
		"format": "godot-ppo-policy", "version": 3, "env": "ball_chase", "observation_size": 4,
		"action_keys": [{"key": "move", "action_type": "continuous", "size": 2}],
		"action_rule": "clipped_mean", "obs_normalization": null,
		"layers": [{"weight": [[0.5, 0, 0, 0], [0, 0.5, 0, 0]], "bias": [bias, 0], "activation": "linear"}],
	}
	if name != "":
		policy["policy_name"] = name
	return to_json(policy)


func _policies_of(policies: Array) -> PolicySet:
	var specs := []
	for name in policies:
		specs.append({"label": "agent %d" % specs.size(), "policy": name, "obs_size": 4, "action_space": SPACE})
	return PolicySet.new("ball_chase", specs)


func test_named_networks_first_then_the_nameless_one() -> void:
	var policies := _policies_of(["red", "blue", "shared_policy"])
	check_eq(policies.load_files(["red.json", "all.json"], {"red.json": _linear("red", 0.25),
			"all.json": _linear("", -0.5)}), "", "load error")
	var zero := [0, 0, 0, 0]
	check_near(policies.act(zero, 0)["move"][0], 0.25, 1e-6, "red plays its own network")
	check_near(policies.act(zero, 1)["move"][0], -0.5, 1e-6, "blue has none: the nameless one")
	check_near(policies.act(zero, 2)["move"][0], -0.5, 1e-6, "nor has shared_policy")
	check_eq(policies.file_names(), "red.json, all.json", "the overlay's names")


func test_a_recurrent_network_keeps_each_agents_state() -> void:
	var lstm: Dictionary = TestPolicyRunner.lstm_policy()
	lstm["version"] = 3
	lstm["policy_name"] = "red"
	var policies := _policies_of(["red", "blue", "red"])
	check_eq(policies.load_files(["red.json", "blue.json"], {"red.json": to_json(lstm),
			"blue.json": _linear("blue", 0.1)}), "", "load error")
	var first: Array = policies.act([1, 1, 1, 1], 0)["move"]
	var second: Array = policies.act([1, 1, 1, 1], 0)["move"]
	check(abs(second[0] - first[0]) > 1e-4, "the state changes what agent 0 does: %s, %s" % [first, second])
	policies.act([0, 0, 0, 0], 1)
	check_eq(policies.act([1, 1, 1, 1], 2)["move"], first, "agent 2 starts afresh: agent 0's steps are its own")
	policies.reset(0)
	check_eq(policies.act([1, 1, 1, 1], 0)["move"], first, "a reset agent starts afresh")


func test_a_files_networks_or_what_is_wrong_come_back_as_a_result() -> void:
	var single = PolicySet.read_runners("red.json", _linear("red", 0.25))
	check(single.goes_on() and single.value.size() == 1 and single.value[0].policy_name == "red", "one network")
	var bundle := {"format": "godot-ppo-policy", "version": 3, "policies": [parse_json(_linear("red", 0.1)),
			parse_json(_linear("red", 0.2))]}
	var twice = PolicySet.read_runners("b.json", to_json(bundle))
	check(twice.is_failure() and twice.value == null, "a bundle naming one policy twice is refused")
	check_eq(twice.message, "policy file b.json: two entries of the bundle are named \"red\"; each policy comes once",
			"its one line")
	var damaged = PolicySet.read_runners("d.json", "{\"format\": ")
	check(damaged.is_failure() and damaged.message.begins_with("policy file d.json: not valid JSON"), damaged.message)
	var missing = PolicySet.read_file("res://no_such_policy.json")
	check(missing.is_failure() and "no_such_policy.json" in missing.message, missing.message)


func test_a_load_says_as_data_whether_an_agent_was_left_unplayed() -> void:
	var policies := _policies_of(["red", "blue"])
	check("no policy file gives it" in policies.load_files(["red.json"], {"red.json": _linear("red", 0.25)}), "blue")
	check(policies.agent_unplayed, "no network plays blue")
	var bad = parse_json(_linear("blue", 0.1))
	bad["observation_size"] = 3
	bad["layers"][0]["weight"] = [[0.5, 0, 0], [0, 0.5, 0]]
	var error := policies.load_files(["red.json", "blue.json"], {"red.json": _linear("red", 0.25),
			"blue.json": to_json(bad)})
	check("expects 3 observations" in error and policies.agent_unplayed, "blue's network does not fit: " + error)
	check("not valid JSON" in policies.load_files(["x.json"], {"x.json": "{"}) and not policies.agent_unplayed,
			"a damaged file is not about an agent")
	check_eq(policies.load_files(["red.json", "blue.json"], {"red.json": _linear("red", 0.25),
			"blue.json": _linear("blue", 0.1)}), "", "both fit")
	check(not policies.agent_unplayed, "and every agent is played")
