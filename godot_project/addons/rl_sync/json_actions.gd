extends Reference
# godot-rl's action message, {"type": "action", "action": [one {key: value} per agent]}: every
# agent's action checked against its action space and converted to the controller's terms (floats
# for a continuous key, an int for a discrete one), then given to the agents (TrainerSession).

const Wire = preload("res://addons/rl_sync/wire.gd")

var _agents: Array
var _action_spaces: Array
# One action_spec() per agent, read once, so the per-step checks index Arrays instead of
# looking keys up in the action spaces.
var _action_specs := []


# `agents` and `action_spaces` are RLSync's own arrays (shared, not copied).
func _init(agents: Array, action_spaces: Array) -> void:
	_agents = agents
	_action_spaces = action_spaces
	for space in action_spaces:
		_action_specs.append(action_spec(space))


# Every action is checked before any agent gets one, so a bad message moves no agent. Returns "" or
# what is wrong.
func apply(message: Dictionary) -> String:
	var actions = message.get("action")
	if typeof(actions) != TYPE_ARRAY or actions.size() != _agents.size():
		return "an action message needs a list of %d actions, one per agent; got %s" \
				% [_agents.size(), Wire.preview(actions)]
	var converted := []
	for i in range(_agents.size()):
		var action := {}
		var error := convert_action(actions[i], _action_spaces[i], _action_specs[i], action)
		if error != "":
			return "the action for agent %d is invalid: %s" % [i, error]
		converted.append(action)
	for i in range(_agents.size()):
		_agents[i].set_action(converted[i])
	return ""


# [[key, size, is_discrete], ...] for one action space, in the space's key order.
static func action_spec(space: Dictionary) -> Array:
	var spec := []
	for key in space:
		spec.append([key, int(space[key]["size"]), space[key]["action_type"] == "discrete"])
	return spec


# Fills `result` with the action in the controller's terms and returns "", or says what is wrong with
# it. `spec` is action_spec(space); `space` only words the errors. This runs for every agent every
# step, so the checks are written inline (and no Result is made).
static func convert_action(action, space: Dictionary, spec: Array, result: Dictionary) -> String:
	if typeof(action) != TYPE_DICTIONARY:
		return "expected an object with the keys %s, got %s" % [str(space.keys()), Wire.preview(action)]
	for entry in spec:
		var key = entry[0]
		if not action.has(key):
			return "the key '%s' is missing (expected keys: %s)" % [key, str(space.keys())]
		var size: int = entry[1]
		var value = action[key]
		var kind := typeof(value)
		if entry[2]:
			if kind == TYPE_ARRAY and value.size() == 1:
				value = value[0]
				kind = typeof(value)
			if (kind != TYPE_REAL and kind != TYPE_INT) or is_nan(value) or value != floor(value) \
					or value < 0 or value >= size:
				return "'%s' must be an integer in [0, %d), got %s" % [key, size, Wire.preview(value)]
			result[key] = int(value)
			continue
		if kind == TYPE_REAL or kind == TYPE_INT:
			value = [value]
		elif kind != TYPE_ARRAY:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, Wire.preview(value)]
		if value.size() != size:
			return "'%s' must be a list of %d numbers, got %s" % [key, size, Wire.preview(value)]
		for x in value:
			var t := typeof(x)
			if (t != TYPE_REAL and t != TYPE_INT) or is_nan(x) or is_inf(x):
				return "'%s' holds %s, which is not a finite number" % [key, Wire.preview(x)]
		result[key] = value
	return ""
