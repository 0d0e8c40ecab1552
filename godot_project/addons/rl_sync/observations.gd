extends Reference
# An agent's observation in the forms the addon sends it. get_obs() returns an Array of numbers (sent
# under the key "obs"), or a Dictionary of keys: vector keys hold Arrays of numbers, and an image key
# (one containing "2d", godot-rl's rule) holds a camera sensor's frame, a PoolByteArray of
# H x W x C bytes (camera_sensor_2d.gd, camera_sensor_3d.gd). In JSON an image goes as the lowercase
# hex of its bytes (what godot-rl's GodotEnv decodes); in the binary step exchange the vector keys'
# values go in the float block, in sorted key order, and the frames as one byte array after it.

const Contract = preload("res://addons/rl_sync/contract.gd")


static func is_image_key(key: String) -> bool:
	return Contract.IMAGE_KEY_MARK in key


# godot-rl's per-agent observation: {"obs": [...]} for an Array; a Dictionary with its images in hex.
static func json(obs) -> Dictionary:
	if typeof(obs) != TYPE_DICTIONARY:
		return {"obs": obs}
	var out := {}
	for key in obs:
		var value = obs[key]
		out[key] = value.hex_encode() if typeof(value) == TYPE_RAW_ARRAY else value
	return out


# The vector keys' values (a Dictionary's in sorted key order): what a float block holds.
static func vector_values(obs):
	if typeof(obs) != TYPE_DICTIONARY:
		return obs
	var keys: Array = obs.keys()
	keys.sort()
	var values := PoolRealArray()
	for key in keys:
		if not is_image_key(key):
			values.append_array(obs[key])
	return values


# The image's bytes, or null when the observation holds none.
static func image(obs):
	if typeof(obs) == TYPE_DICTIONARY:
		for key in obs:
			if is_image_key(key):
				return obs[key]
	return null


# The images beside packed observations (json()'s forms): [{"camera_2d": hex}, ...] for every agent,
# when an agent has one ([] otherwise: a vector game's reply is what it always was).
static func packed_images(obs: Array) -> Array:
	var images := []
	var any := false
	for agent_obs in obs:
		var agent_images := {}
		for key in agent_obs:
			if is_image_key(key):
				agent_images[key] = agent_obs[key]
				any = true
		images.append(agent_images)
	return images if any else []


# "" or what in an agent's observation the trainer could not read, naming the key.
static func problem(obs) -> String:
	if typeof(obs) in [TYPE_REAL_ARRAY, TYPE_INT_ARRAY]:
		return ""
	if typeof(obs) == TYPE_DICTIONARY:
		var images := 0
		for key in obs:
			var error := _key_problem(str(key), obs[key])
			if error != "":
				return error
			images += 1 if is_image_key(str(key)) else 0
		return "" if images <= 1 else "get_obs() holds %d image keys (keys containing \"2d\"); an agent has one camera at most" % images
	return _numbers_problem(obs, "get_obs()")


static func _key_problem(key: String, value) -> String:
	if is_image_key(key):
		if typeof(value) == TYPE_RAW_ARRAY:
			return ""
		return "get_obs()[\"%s\"] is %s: a key containing \"2d\" is an image, a camera sensor's get_frame() (a PoolByteArray)" \
				% [key, preview(value)]
	if typeof(value) in [TYPE_REAL_ARRAY, TYPE_INT_ARRAY]:
		return ""
	return _numbers_problem(value, "get_obs()[\"%s\"]" % key)


static func _numbers_problem(values, what: String) -> String:
	if typeof(values) != TYPE_ARRAY:
		# to_json quotes a String, so "abc" is not mistaken for a name in the message
		return "%s returned %s, not an Array of numbers" % [what, preview(to_json(values))]
	for k in range(values.size()):
		if not typeof(values[k]) in [TYPE_INT, TYPE_REAL, TYPE_BOOL]:
			return "%s holds %s at index %d, not a number; an observation is a flat Array of numbers" \
					% [what, preview(values[k]), k]
	return ""



# A value as it appears in an error message, cut to 120 characters.
static func preview(value) -> String:
	var text := to_json(value) if typeof(value) in [TYPE_ARRAY, TYPE_DICTIONARY] else str(value)
	return text if text.length() <= 120 else text.substr(0, 120) + "..."
