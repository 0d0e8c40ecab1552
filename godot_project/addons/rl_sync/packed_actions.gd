extends Reference
# Our packed action message (the binary step exchange, see wire.gd): every continuous value as one
# float32 array and every discrete one as one int32 array, agents in order and each agent's keys in
# sorted order. The same checks as json_actions.gd (finite values, discrete values in range), then
# each agent gets its action (TrainerSession).

const Wire = preload("res://addons/rl_sync/wire.gd")

var _agents: Array
# One spec per agent in sorted key order (the order the trainer packs them in), and how many float32
# and int32 values a whole message holds.
var _sorted_specs := []
var _packed_floats := 0
var _packed_ints := 0
# For each int32 value: its key's number of choices, and [agent index, key].
var _int_sizes := PoolIntArray()
var _int_owners := []


# `agents` and `action_spaces` are RLSync's own arrays (shared, not copied).
func _init(agents: Array, action_spaces: Array) -> void:
	_agents = agents
	for space in action_spaces:
		var sorted_spec := sorted_action_spec(space)
		_sorted_specs.append(sorted_spec)
		for entry in sorted_spec:
			if entry[2]:
				_packed_ints += 1
				_int_sizes.append(entry[1])
				_int_owners.append([_sorted_specs.size() - 1, entry[0]])
			else:
				_packed_floats += entry[1]


# Every value is checked before any agent gets its action, so a bad message moves no agent. Returns
# "" or what is wrong.
func apply(body: PoolByteArray) -> String:
	var unpacked: Reference = Wire.unpack_actions(body, _packed_floats, _packed_ints)
	if unpacked.is_failure():
		return unpacked.message
	var floats: PoolRealArray = unpacked.value[0]
	var ints: PoolIntArray = unpacked.value[1]
	# One sum finds any NaN or infinity (a sum of finite float32 values cannot overflow a float64);
	# only then is the culprit looked for.
	var total := 0.0
	for x in floats:
		total += x
	if is_nan(total) or is_inf(total):
		return _non_finite_action(floats)
	for k in range(ints.size()):
		var choice: int = ints[k]
		if choice < 0 or choice >= _int_sizes[k]:
			var owner: Array = _int_owners[k]
			return "the action for agent %d is invalid: '%s' must be an integer in [0, %d), got %d" \
					% [owner[0], owner[1], _int_sizes[k], choice]
	# Every value is valid: each agent gets its action as soon as it is built.
	var f := 0
	var d := 0
	for i in range(_agents.size()):
		var action := {}
		for entry in _sorted_specs[i]:
			if entry[2]:
				action[entry[0]] = ints[d]
				d += 1
				continue
			var size: int = entry[1]
			if size == 2:  # the usual case (a 2-D move), written out: a third quicker than the loop
				action[entry[0]] = [floats[f], floats[f + 1]]
				f += 2
			else:
				var values := []
				for _j in range(size):
					values.append(floats[f])
					f += 1
				action[entry[0]] = values
		_agents[i].set_action(action)
	return ""


# The error for the first NaN or infinite value among packed continuous actions.
func _non_finite_action(floats: PoolRealArray) -> String:
	var f := 0
	for i in range(_agents.size()):
		for entry in _sorted_specs[i]:
			if entry[2]:
				continue
			for _j in range(entry[1]):
				var x: float = floats[f]
				f += 1
				if is_nan(x) or is_inf(x):
					return "the action for agent %d is invalid: '%s' holds %s, which is not a finite number" \
							% [i, entry[0], str(x)]
	return "packed actions hold a value that is not a finite number"


# [[key, size, is_discrete], ...] for one action space, keys in sorted order: the order of the
# values in packed actions.
static func sorted_action_spec(space: Dictionary) -> Array:
	var keys := space.keys()
	keys.sort()
	var spec := []
	for key in keys:
		spec.append([key, int(space[key]["size"]), space[key]["action_type"] == "discrete"])
	return spec
