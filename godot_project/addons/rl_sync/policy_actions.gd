extends Reference
# What a policy's outputs mean: its "action_keys" ([{"key", "action_type", "size"}], in the order of
# the network's outputs) checked, matched against a game's action space, and the outputs turned into
# an action by the file's rule (policy_runner.gd): the Gaussian mean clipped to [-1, 1] for each
# continuous key, the most likely choice for each discrete one. Errors come back without the file's
# name: the runner adds it.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")


# Each action key needs a name, a kind and a size of at least 1; returns "" or what is wrong.
static func check_keys(action_keys) -> String:
	if typeof(action_keys) != TYPE_ARRAY or action_keys.empty():
		return "\"action_keys\" must be a non-empty list of {\"key\", \"action_type\", \"size\"}"
	for key in action_keys:
		if typeof(key) != TYPE_DICTIONARY or not key.has("key") or not key.get("action_type") in ["continuous", "discrete"] \
				or not BlockCompiler.is_size(key.get("size")):
			return "every action key needs \"key\", \"action_type\" (continuous or discrete) and a \"size\" from 1 to %d; got %s" \
					% [BlockCompiler.MAX_SIZE, Wire.preview(key)]
	return ""


# How many network outputs the keys take.
static func output_count(action_keys: Array) -> int:
	var n := 0
	for key in action_keys:
		n += int(key["size"])
	return n


# "" when the keys are the game's (in any order), else a message naming both lists.
static func mismatch(action_keys: Array, action_space: Dictionary) -> String:
	var matches := action_keys.size() == action_space.size()
	for key in action_keys:
		var name := str(key["key"])
		if not action_space.has(name) or action_space[name]["action_type"] != key["action_type"] \
				or int(action_space[name]["size"]) != int(key["size"]):
			matches = false
	if matches:
		return ""
	var theirs := []
	for key in action_keys:
		theirs.append([str(key["key"]), key["action_type"], int(key["size"])])
	var ours := []
	for name in action_space:
		ours.append([str(name), action_space[name]["action_type"], int(action_space[name]["size"])])
	return "its action keys %s do not match the game's %s" % [key_list(theirs), key_list(ours)]


# [[key, kind, size], ...] as "[jump (discrete, 2), move (continuous, 2)]", sorted by key.
static func key_list(keys: Array) -> String:
	var words := []
	for entry in keys:
		words.append("%s (%s, %d)" % entry)
	words.sort()
	return "[" + PoolStringArray(words).join(", ") + "]"


static func to_action(action_keys: Array, outputs: Array) -> Dictionary:
	var action := {}
	var offset := 0
	for key in action_keys:
		var size := int(key["size"])
		if key["action_type"] == "discrete":
			var best := 0
			for i in range(1, size):
				if outputs[offset + i] > outputs[offset + best]:
					best = i
			action[key["key"]] = best
		else:
			var values := []
			for i in range(size):
				values.append(clamp(outputs[offset + i], -1.0, 1.0))
			action[key["key"]] = values
		offset += size
	return action
