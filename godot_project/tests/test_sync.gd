extends "res://tests/sync_test_case.gd"
# The sync node's episode bookkeeping and action validation, without a trainer.

const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")


func test_reward_is_collected_and_zeroed() -> void:
	_setup(2, 100)
	agents[0].reward = 1.5
	var step: Dictionary = sync.decision_step()
	check_eq(step["reward"], [1.5, 0.0], "rewards")
	check_eq(agents[0].reward, 0.0, "reward after collection")
	check_eq(agents[0].episode_return, 1.5, "episode return")
	check_eq(step["done"], [false, false], "dones")
	check_eq(step["info"], [{}, {}], "infos of running episodes")


func test_termination_resets_at_once_and_keeps_terminal_observation() -> void:
	_setup(2, 100)
	agents[1].position = 7.0
	agents[1].done = true
	var step: Dictionary = sync.decision_step()
	check_eq(step["done"], [false, true], "dones")
	check_eq(step["info"][1]["terminal_observation"], {"obs": [7.0, 1.0]}, "terminal observation")
	check_eq(step["info"][1]["TimeLimit.truncated"], false, "truncated flag on termination")
	# The observation in the same reply is the first of the next episode.
	check_eq(step["obs"][1], {"obs": [0.0, 2.0]}, "first observation of the next episode")
	check_eq(agents[1].done, false, "done cleared by the reset")
	check_eq(agents[1].n_steps, 0, "step counter restarted")


func test_ended_step_carries_the_info_of_the_ended_episode() -> void:
	_setup(2, 100)
	agents[0].info["fruits"] = 2
	agents[1].info["fruits"] = 5
	agents[1].info["wall_hits"] = 1.0
	agents[1].done = true
	var step: Dictionary = sync.decision_step()
	check_eq(step["info"][0], {"fruits": 2}, "info of a running episode")
	var ended: Dictionary = step["info"][1]
	check_eq(ended["fruits"], 5, "the ended episode's value, though the reset cleared the controller's info")
	check_eq(ended["wall_hits"], 1.0, "every key of the ended episode's info")
	check_eq(ended["TimeLimit.truncated"], false, "our keys next to the controller's")
	check_eq(agents[1].info, {}, "the controller's own Dictionary gets none of our keys")


func test_time_limit_truncates() -> void:
	_setup(1, 3)
	var dones := []
	var truncated = null
	for _i in range(3):
		var step: Dictionary = sync.decision_step()
		dones.append(step["done"][0])
		if step["done"][0]:
			truncated = step["info"][0]["TimeLimit.truncated"]
	check_eq(dones, [false, false, true], "episode ends on the limit's step")
	check_eq(truncated, true, "TimeLimit.truncated")


func test_termination_on_the_last_step_is_not_truncation() -> void:
	_setup(1, 2)
	sync.decision_step()
	agents[0].done = true
	var step: Dictionary = sync.decision_step()
	check_eq(step["info"][0]["TimeLimit.truncated"], false, "a failure on the limit step is a termination")


# [what is wrong ("" for nothing), the converted action].
func _convert(action, space: Dictionary) -> Array:
	var converted := {}
	var error := JsonActions.convert_action(action, space, JsonActions.action_spec(space), converted)
	return [error, converted]


func test_valid_actions_are_converted() -> void:
	_setup(1, 10)
	# JSON numbers arrive as floats; discrete choices become ints.
	var action := _convert({"move": [0.5, -1.0], "jump": 2.0}, agents[0].get_action_space())
	check_eq(action, ["", {"move": [0.5, -1.0], "jump": 2}], "converted action")
	action = _convert({"move": [0, 0], "jump": [1.0]}, agents[0].get_action_space())
	check_eq(action, ["", {"move": [0, 0], "jump": 1}], "a one-element list is accepted for a discrete key")


func test_invalid_actions_are_explained() -> void:
	_setup(1, 10)
	var space: Dictionary = agents[0].get_action_space()
	var cases := [
		[[0.5, 0.5], "expected an object"],
		[{"jump": 1}, "'move' is missing"],
		[{"move": [0.5], "jump": 1}, "must be a list of 2 numbers"],
		[{"move": [0.5, "x"], "jump": 1}, "not a finite number"],
		[{"move": [0.5, INF], "jump": 1}, "not a finite number"],
		[{"move": [0.5, NAN], "jump": 1}, "not a finite number"],
		[{"move": [0.5, 0.5], "jump": 3}, "must be an integer in [0, 3)"],
		[{"move": [0.5, 0.5], "jump": 1.5}, "must be an integer in [0, 3)"],
	]
	for case in cases:
		var error: String = _convert(case[0], space)[0]
		check(case[1] in error,
				"action %s: expected an error containing \"%s\", got \"%s\"" % [str(case[0]), case[1], error])


func test_step_reply_is_json_with_godot_rl_keys() -> void:
	_setup(2, 100)
	agents[0].reward = 0.25
	agents[1].done = true
	var text: String = Wire.step_json(sync.decision_step(), false)
	var parsed := JSON.parse(text)
	check_eq(parsed.error, OK, "the hand-built step reply parses as JSON: " + text)
	var reply: Dictionary = parsed.result
	check_eq(reply["type"], "step", "type")
	check_eq(reply["obs"], [{"obs": [0.0, 1.0]}, {"obs": [0.0, 2.0]}], "observations")
	check_eq(reply["reward"], [0.25, 0.0], "rewards")
	check_eq(reply["done"], [false, true], "dones")
	check_eq(reply["info"][1]["TimeLimit.truncated"], false, "info of the ended episode")


func test_zero_action_matches_the_space() -> void:
	_setup(1, 10)
	check_eq(agents[0].zero_action(), {"move": [0.0, 0.0], "jump": 0}, "zero action")


func test_action_messages_are_checked_before_any_agent_moves() -> void:
	_setup(2, 10)
	var actions = JsonActions.new(sync.agents, sync.action_spaces)
	var error: String = actions.apply({"type": "action", "action": [{"move": [0.5, 0.5], "jump": 1}]})
	check_eq(error,
			"an action message needs a list of 2 actions, one per agent; got [{\"jump\":1,\"move\":[0.5,0.5]}]",
			"wrong number of actions")
	error = actions.apply({"type": "action", "action": [{"move": [0.5, 0.5], "jump": 1}, {"move": [0.5, 0.5]}]})
	check_eq(error, "the action for agent 1 is invalid: the key 'jump' is missing (expected keys: [move, jump])",
			"a bad action names its agent and key")
	check_eq(agents[0].last_action, {}, "no agent moved on a bad message")
	var good := [{"move": [0.5, 0.5], "jump": 1.0}, {"move": [1, -1], "jump": 0}]
	error = actions.apply({"type": "action", "action": good})
	check_eq(error, "", "a good message")
	check_eq(agents[0].last_action, {"move": [0.5, 0.5], "jump": 1}, "agent 0's action")
	check_eq(agents[1].last_action, {"move": [1, -1], "jump": 0}, "agent 1's action")


# step_order.gd: a step that ends an episode is closed a frame before its reply; the reply is the one an
# immediate reset gives, and changes the game made between the close and the reply reach it.
func test_a_closed_step_replies_as_an_immediate_reset_does() -> void:
	_setup(2, 3)
	agents[0].reward = 0.5
	agents[1].position = 7.0
	agents[1].done = true
	check(DecisionStep.any_ending(agents), "a done agent ends its episode at this step")
	var closed: Array = DecisionStep.close(agents)
	check_eq(agents[1].resets, 2, "the close resets the ended agent")
	agents[0].position = 4.0  # what a deferred call of the game may do before the reply
	var step: Dictionary = DecisionStep.json(agents, closed)
	check_eq(step["reward"], [0.5, 0.0], "rewards taken at the close")
	check_eq(step["done"], [false, true], "dones")
	check_eq(step["info"][1]["terminal_observation"], {"obs": [7.0, 1.0]}, "the terminal observation, before the reset")
	check_eq(step["obs"], [{"obs": [4.0, 1.0]}, {"obs": [0.0, 2.0]}], "observations taken at the reply")
	check_eq(agents[1].resets, 2, "the reply resets nothing more")
	check(not DecisionStep.any_ending(agents), "nobody ends at the next step")
	agents[0].n_steps = 2
	check(DecisionStep.any_ending(agents), "the time limit ends an episode at the step that reaches it")
