extends "res://tests/test_case.gd"
# input_actions.gd, the bridge that presses a game's input actions as a keyboard does: what a game reading
# Input in each physics and idle frame sees (input_probe.gd records it), with decisions that span frames.

const InputActions = preload("res://addons/rl_sync/input_actions.gd")
const Probe = preload("res://tests/input_probe.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

var probes := []


# What the controllers of own_flow.md did before the bridge: press or release at every decision.
class EveryDecision:
	func press(action: Dictionary) -> void:
		for name in action:
			if action[name] == 1:
				Input.action_press(name)
			else:
				Input.action_release(name)


func cleanup() -> void:
	for probe in probes:
		probe.queue_free()
	for name in Probe.KEYS.keys() + Probe.ANALOGUE_ACTIONS:
		Input.action_release(name)


# The agent's `decisions`, each held `frames` physics frames (no decision in between, as --action_repeat).
static func spanning(decisions: Array, frames: int) -> Array:
	var out := []
	for decision in decisions:
		out.append(decision)
		for _i in range(frames - 1):
			out.append(null)
	return out


# The probe's records of `actions` pressed by `bridge`, one per physics frame.
func run(bridge, actions: Array):
	Probe.add_actions()
	yield(tree, "idle_frame")  # past the frame of the last test's releases (cleanup)
	yield(tree, "idle_frame")
	var probe = Probe.new()
	probe.bridge = bridge
	probe.actions = actions
	probes.append(probe)
	tree.root.add_child(probe)
	while probe.idle.size() < actions.size():
		yield(tree, "idle_frame")
	probe.set_physics_process(false)
	probe.set_process(false)
	return probe


# The frames of `records` in which `name`'s field `index` (0 pressed, 1 just pressed, 2 just released) is set.
static func frames(records: Array, name: String, index: int) -> Array:
	var out := []
	for i in range(records.size()):
		if records[i][name][index]:
			out.append(i)
	return out


func test_a_held_action_is_pressed_once_and_released_once_across_decisions() -> void:
	Probe.add_actions()
	var bridge = InputActions.new({"jump": ["probe_jump"]})
	var decisions := []
	for pressed in [1, 1, 1, 0, 0, 1]:
		decisions.append({"jump": pressed})
	var probe = yield(run(bridge, spanning(decisions, 4)), "completed")
	for records in [probe.physics, probe.idle]:
		check_eq(frames(records, "probe_jump", 1), [0, 20], "just pressed: on the first decision, then on the change")
		check_eq(frames(records, "probe_jump", 2), [12], "just released: once, on the frame the choice changed")
		check_eq(frames(records, "probe_jump", 0).size(), 16, "pressed through the held decisions' frames")
	check_eq(frames(probe.physics, "probe_jump", 4), [0, 20], "_input() got one press event per press")
	check_eq(frames(probe.physics, "probe_jump", 5), [12], "and one release event")


func test_pressing_at_every_decision_stamps_a_new_press_each_time_in_godot_3_2() -> void:
	var decisions := []
	for pressed in [1, 1, 1, 0, 0, 1]:
		decisions.append({"probe_jump": pressed})
	var probe = yield(run(EveryDecision.new(), spanning(decisions, 4)), "completed")
	check_eq(frames(probe.physics, "probe_jump", 1), [0, 4, 8, 20], "Input.action_press stamps each call")
	check_eq(frames(probe.physics, "probe_jump", 2), [12, 16], "Input.action_release stamps each call")


func test_an_analogue_strength_passes_through_without_a_new_press() -> void:
	Probe.add_actions()
	var bridge = InputActions.new({"stick": {"analogue": ["probe_stick_left", "probe_stick_right"]}})
	check_eq(bridge.action_space(), {"stick": {"size": 1, "action_type": "continuous"}}, "one continuous value")
	var decisions := []
	for v in [0.5, 0.8, -0.3, 0.0]:
		decisions.append({"stick": [v]})
	var probe = yield(run(bridge, spanning(decisions, 2)), "completed")
	var right := []
	var left := []
	for record in probe.physics:
		right.append(record["probe_stick_right"][3])
		left.append(record["probe_stick_left"][3])
	check_eq(right, [0.5, 0.5, 0.8, 0.8, 0.0, 0.0, 0.0, 0.0], "the right strength, frame by frame")
	check_eq(left, [0.0, 0.0, 0.0, 0.0, 0.3, 0.3, 0.0, 0.0], "the left strength, frame by frame")
	check_eq(frames(probe.physics, "probe_stick_right", 1), [0], "a stronger push is no new press")
	check_eq(frames(probe.physics, "probe_stick_right", 2), [4], "released when the stick crosses to the left")
	check_eq(frames(probe.physics, "probe_stick_left", 1), [4], "left pressed in that same frame")
	check_eq(frames(probe.physics, "probe_stick_left", 2), [6], "left released at 0")


func test_a_key_of_several_actions_presses_one_at_a_time() -> void:
	Probe.add_actions()
	var bridge = InputActions.new({"x": ["probe_left", "probe_right"]})
	check_eq(bridge.action_space(), {"x": {"size": 3, "action_type": "discrete"}}, "none, left, right")
	var probe = yield(run(bridge, spanning([{"x": 1}, {"x": 2}, {"x": 0}], 3)), "completed")
	check_eq(frames(probe.physics, "probe_left", 0), [0, 1, 2], "left held for its decision")
	check_eq(frames(probe.physics, "probe_right", 0), [3, 4, 5], "right held for its decision")
	check_eq(frames(probe.physics, "probe_left", 2) + frames(probe.physics, "probe_right", 2), [3, 6],
			"each released once, when the choice changed")


func test_no_keys_make_one_discrete_key_per_action_of_the_input_map() -> void:
	Probe.add_actions()
	var space: Dictionary = InputActions.new().action_space()
	for name in Probe.KEYS:
		check_eq(space.get(name), {"size": 2, "action_type": "discrete"}, "the key of " + name)
	check(not space.has("ui_accept"), "Godot's ui_ actions are left out")


func test_a_persons_keys_read_back_as_the_action_that_presses_nothing_new() -> void:
	Probe.add_actions()
	var bridge = InputActions.new({"x": ["probe_left", "probe_right"], "stick": {"analogue": ["probe_stick_right"]}})
	Input.action_press("probe_right")  # as the keyboard's event does
	Input.action_press("probe_stick_right", 0.25)
	var action: Dictionary = bridge.from_input()
	check_eq(action, {"x": 2, "stick": [0.25]}, "what the keys press")
	check_eq(bridge.strengths(action), {"probe_left": 0.0, "probe_right": 1.0, "probe_stick_right": 0.25},
			"the same strengths pressed back")


func test_keys_that_are_not_the_games_actions_are_refused_in_one_line() -> void:
	Probe.add_actions()
	check("no actions to press" in InputActions.check({}), "no keys")
	check("\"probe_jmup\" is not one of the game's input actions" in InputActions.check({"j": ["probe_jmup"]}),
			"a misspelt action is named")
	check("pressed by key" in InputActions.check({"a": ["probe_left"], "b": ["probe_left"]}), "one action, two keys")
	check("an analogue key is" in InputActions.check({"s": {"analogue": ["probe_left", "probe_right", "probe_jump"]}}),
			"an analogue key of three actions")
	check_eq(InputActions.check({"x": ["probe_left", "probe_right"], "s": {"analogue": ["probe_stick_left"]}}), "",
			"good keys")


func test_copies_are_refused_as_they_share_the_input_singleton() -> void:
	RlArgs.set_override({"copies": "2"})
	var refusal := InputActions.copies_refusal()
	RlArgs.set_override({})
	check("--copies=2 cannot run this game" in refusal, "refused with copies: " + refusal)
	check_eq(InputActions.copies_refusal(), "", "one copy is fine")
