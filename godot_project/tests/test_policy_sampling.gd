extends "res://tests/test_case.gd"
# policy_sampling.gd: --policy_noop_max's starts (the controller's get_noop_action(), else random
# actions of its space, for a number of decisions drawn in [0, K]) and --policy_sample's draws.

const PolicySampling = preload("res://addons/rl_sync/policy_sampling.gd")

const SPACE := {"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 3, "action_type": "discrete"}}
const NOOP := {"move": [0.0, 0.0], "jump": 0}


func _agent(with_noop: bool) -> Node:
	var node := Node.new()
	if with_noop:
		var script := GDScript.new()
		script.source_code = "extends Node\nfunc get_noop_action() -> Dictionary:\n\treturn {\"move\": [0.0, 0.0], \"jump\": 0}\n"
		script.reload()
		node.set_script(script)
	return node


# The no-op decisions of one episode that starts now, then the first decision the policy plays (null).
func _start(starts, agent: Node) -> Array:
	var played := []
	var action = starts.action(0, true, agent, SPACE)
	while action != null and played.size() < 100:
		played.append(action)
		action = starts.action(0, false, agent, SPACE)
	return played


func test_noop_starts_play_get_noop_action_for_a_drawn_number_of_decisions() -> void:
	var agent := _agent(true)
	var starts = PolicySampling.NoopStarts.new(1, 5, 7)
	var lengths := {}
	for _episode in range(60):
		var played := _start(starts, agent)
		lengths[played.size()] = true
		for action in played:
			check_eq(action, NOOP, "a no-op decision")
	check(starts.action(0, false, agent, SPACE) == null, "after its start, the policy plays the episode")
	var seen := lengths.keys()
	seen.sort()
	check_eq(seen, [0, 1, 2, 3, 4, 5], "the starts' lengths, drawn in [0, 5]")
	agent.free()


func test_noop_starts_without_get_noop_action_play_random_actions_of_the_space() -> void:
	var agent := _agent(false)
	var starts = PolicySampling.NoopStarts.new(1, 30, 1)
	var played := []
	for _episode in range(5):
		played += _start(starts, agent)
	check(played.size() > 10, "five starts of up to 30 decisions play some")
	var jumps := {}
	for action in played:
		check(action["jump"] in [0, 1, 2] and abs(action["move"][0]) <= 1.0 and abs(action["move"][1]) <= 1.0,
				"a random action of the space: %s" % to_json(action))
		jumps[action["jump"]] = true
	check(jumps.size() > 1, "random, not one action")
	agent.free()


func test_sample_draws_near_certain_choices_and_clips_continuous_values() -> void:
	var keys := [{"key": "move", "action_type": "continuous", "size": 2, "log_std": [-20.0, -20.0]},
			{"key": "jump", "action_type": "discrete", "size": 3}]
	var rng := RandomNumberGenerator.new()
	rng.seed = 4
	for _i in range(20):
		var action := PolicySampling.sample(keys, [0.25, 3.0, -10.0, -10.0, 10.0], rng)
		check_near(action["move"][0], 0.25, 1e-6, "a tiny std keeps the mean")
		check_eq(action["move"][1], 1.0, "a mean beyond 1 is clipped")
		check_eq(action["jump"], 2, "a logit 20 above the others is drawn")
