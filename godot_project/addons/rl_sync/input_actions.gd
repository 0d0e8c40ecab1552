extends Reference
# A game's own input actions (Project Settings > Input Map) as an agent's action space, pressed the way
# a person's keyboard or joypad presses them.
#
# A game written for people reads Input: is_action_pressed(), get_action_strength(), and the once-per-press
# is_action_just_pressed() / is_action_just_released(). Input.action_press() stamps "just pressed" at every
# call (and action_release() "just released"), so a controller that calls them at every decision gives the
# game a new press or release at every decision: a jump cut short, a menu stepped twice. This bridge sends
# the game an InputEventAction (Input.parse_input_event(), as the keyboard's events go) only when what is
# pressed or its strength changes: Input stamps a press or a release once, on the change of state, as it does
# for a key; a held action stays pressed across decisions and --action_repeat frames without a new stamp; an
# analogue strength passes through (get_action_strength()), a change of it while held stamps nothing. The
# game's _input() and _unhandled_input() get the events too, as they get a key's.
#
#   const InputActions = preload("res://addons/rl_sync/input_actions.gd")
#   var actions := InputActions.new({"x": ["move_left", "move_right"], "jump": ["jump"]})
#   func get_action_space() -> Dictionary: return actions.action_space()
#   func set_action(action: Dictionary) -> void: actions.press(action)
#   func get_heuristic_action() -> Dictionary: return actions.from_input()
#
# The keys, one entry each: the agent's action key -> the game's actions it presses.
#   "jump": ["jump"]                       discrete, size 2: 0 released, 1 pressed
#   "x": ["move_left", "move_right"]       discrete, size n + 1: 0 none, i the i-th action (one at a time)
#   "steer": {"analogue": ["left", "right"]}  continuous, size 1, in [-1, 1]: v > 0 presses the last action
#                                          with strength v, v < 0 the first (of two) with strength -v, 0 none
# InputActions.new() with no keys makes one discrete key per action of the Input Map not starting with "ui_",
# named as the action. The sync node sets the actions first in the decision's physics frame (it runs before
# every other node), so the game sees a press in that frame's _physics_process and its _process, as a key's.
#
# Input is one singleton per process: every agent of a process would press the same actions, so a game
# that uses this has one agent per instance and refuses --copies (docs/own_flow.md).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ANALOGUE := "analogue"
const UI_PREFIX := "ui_"

# key -> {"actions": [names], "analogue": bool}, in the order given.
var keys := {}


func _init(declared = null) -> void:
	if declared == null:
		declared = from_input_map()
	var error := check(declared)
	error = copies_refusal() if error == "" else "input_actions.gd: " + error
	if error != "":
		RlArgs.fail(Engine.get_main_loop(), error)
		return
	for key in declared:
		var entry = declared[key]
		var analogue: bool = entry is Dictionary
		keys[key] = {"actions": entry[ANALOGUE] if analogue else entry, "analogue": analogue}


# One discrete key per action of the Input Map that is not one of Godot's built-in "ui_" actions.
static func from_input_map() -> Dictionary:
	var declared := {}
	for action in InputMap.get_actions():
		if not str(action).begins_with(UI_PREFIX):
			declared[str(action)] = [str(action)]
	return declared


# What is wrong with declared keys, in one line, or "".
static func check(declared) -> String:
	if not declared is Dictionary or declared.empty():
		return "no actions to press: give {key: [action, ...]}, or add actions to the Input Map (Project Settings > Input Map)"
	var seen := {}
	for key in declared:
		var entry = declared[key]
		var names = entry
		if entry is Dictionary:
			names = entry.get(ANALOGUE)
			if entry.size() != 1 or not names is Array or names.size() > 2:
				return "key '%s': an analogue key is {\"analogue\": [action]} or {\"analogue\": [negative, positive]}, not %s" % [key, to_json(entry)]
		if not names is Array or names.empty():
			return "key '%s': give a list of the game's input actions, not %s" % [key, to_json(entry)]
		for name in names:
			if not name is String or not InputMap.has_action(name):
				return "key '%s': %s is not one of the game's input actions (%s): add it to the Input Map or fix the name" \
						% [key, to_json(name), PoolStringArray(_known_actions()).join(", ")]
			if seen.has(name):
				return "key '%s': action '%s' is pressed by key '%s' too: give each action one key" % [key, name, seen[name]]
			seen[name] = key
	return ""


# Why this run cannot press the Input singleton's actions, or "": --copies puts several agents in one process.
static func copies_refusal() -> String:
	var copies := RlArgs.get_string("copies", "1")
	if copies.is_valid_integer() and int(copies) > 1:
		return ("--copies=%s cannot run this game: its agent presses the game's input actions (input_actions.gd), " \
				+ "and the Input singleton is one per process, so every copy's agent would press the same actions; " \
				+ "run one copy per instance") % copies
	return ""


static func _known_actions() -> Array:
	var names := []
	for action in InputMap.get_actions():
		names.append(str(action))
	return names


# godot-rl's action-space schema of the keys.
func action_space() -> Dictionary:
	var space := {}
	for key in keys:
		if keys[key]["analogue"]:
			space[key] = {"size": 1, "action_type": "continuous"}
		else:
			space[key] = {"size": keys[key]["actions"].size() + 1, "action_type": "discrete"}
	return space


# The strength each of the game's actions gets from an agent's action (0.0: released).
func strengths(action: Dictionary) -> Dictionary:
	var out := {}
	for key in keys:
		var names: Array = keys[key]["actions"]
		if keys[key]["analogue"]:
			var value = action[key]
			var v := clamp(float(value[0] if value is Array else value), -1.0, 1.0)
			out[names[-1]] = max(v, 0.0)
			if names.size() == 2:
				out[names[0]] = max(-v, 0.0)
		else:
			var chosen := int(action[key])
			for i in range(names.size()):
				out[names[i]] = 1.0 if chosen == i + 1 else 0.0
	return out


# Presses and releases the game's actions as an agent's action says, sending an event only for what changed.
func press(action: Dictionary) -> void:
	var wanted := strengths(action)
	for name in wanted:
		set_strength(name, wanted[name])


# One action to `strength` (0.0 releases it): an event only when its state or its strength changes.
static func set_strength(name: String, strength: float) -> void:
	var pressed := strength > 0.0
	if pressed == Input.is_action_pressed(name) and abs(strength - Input.get_action_strength(name)) < 1e-6:
		return
	var event := InputEventAction.new()
	event.action = name
	event.pressed = pressed
	event.strength = strength
	Input.parse_input_event(event)


# Releases every action of the keys (a game that stops listening, a test's clean-up).
func release_all() -> void:
	for key in keys:
		for name in keys[key]["actions"]:
			set_strength(name, 0.0)


# The action the game's actions stand at now: what a person's keys and joypad press, for
# get_heuristic_action() (press() of it then sends nothing, so the keyboard's own stamps stay).
func from_input() -> Dictionary:
	var action := {}
	for key in keys:
		var names: Array = keys[key]["actions"]
		if keys[key]["analogue"]:
			var v := Input.get_action_strength(names[-1])
			if names.size() == 2:
				v -= Input.get_action_strength(names[0])
			action[key] = [v]
		else:
			action[key] = 0
			for i in range(names.size()):
				if Input.is_action_pressed(names[i]):
					action[key] = i + 1
					break
	return action
