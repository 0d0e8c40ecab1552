extends Reference
# Runs a trained policy inside the engine: loads a policy file written by `godot-ppo export-policy`,
# checks it against an agent, normalises observations and runs the MLP forward pass in GDScript.
#
# The file is JSON, format "godot-ppo-policy" (versions 1 to 5 read the same way; 4 adds camera
# policies: "image" and "cnn", conv_network.gd; 5 each continuous key's "log_std", which
# --policy_sample draws with: policy_sampling.gd). Its fields (env, policy_name, observation_size,
# action_keys, action_rule, obs_normalization, layers, lstm) are in docs/watching.md, "The policy file".
#
# The work is shared out: obs_normalization.gd normalises, policy_network.gd checks the layers and
# runs them (compiled to fast GDScript by block_compiler.gd), policy_actions.gd turns the outputs
# into actions. This file reads the file, checks it fits an agent, and runs the three in turn.
# A bundle of several policies ({"policies": [...]}) is policy_set.gd's to split: each entry is one of these.

const Contract = preload("res://addons/rl_sync/contract.gd")
const FORMAT := Contract.POLICY_FORMAT
const VERSION := Contract.POLICY_VERSION
const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const ConvNetwork = preload("res://addons/rl_sync/conv_network.gd")
const ObsNormalization = preload("res://addons/rl_sync/obs_normalization.gd")
const PolicyActions = preload("res://addons/rl_sync/policy_actions.gd")
const PolicyLimits = preload("res://addons/rl_sync/policy_limits.gd")
const PolicyNetwork = preload("res://addons/rl_sync/policy_network.gd")
const PolicySampling = preload("res://addons/rl_sync/policy_sampling.gd")
const Result = preload("res://addons/rl_sync/result.gd")

var path := ""
var env := ""
# The agents' policy_name this network plays; "" for a file without one, which plays every agent.
var policy_name := ""
var observation_size := 0
var action_keys := []
var action_rule := ""
var normalize := false
# The file's "source" (informational: run, checkpoint, global step...); {} when it has none.
var source := {}
# A recurrent policy's LSTM (lstm_cell.gd, one state per agent; null for an MLP).
var lstm = null
# A camera policy's encoder (conv_network.gd; null without a camera).
var cnn = null
var _normalization: ObsNormalization = null
var _network: PolicyNetwork = null
var _n_outputs := 0
# --policy_sample: this runner's generator (policy_sampling.gd); null: the file's action_rule.
var _sampler = PolicySampling.sampler()
# Set before loading: the network gets a setter of its weights (in-engine actors; weights_setter.gd).
var settable := false


# Loads and validates the file; returns "" or a message naming the file and what is wrong (a file
# over the engine's bounds is refused before it is read or built: policy_limits.gd).
func load_file(file_path: String) -> String:
	path = file_path
	var read: Result = PolicyLimits.read_text(file_path)
	return read.message if read.is_failure() else load_text(read.value)


# Loads a policy file's content (`path` names it in errors); returns "" or what is wrong.
func load_text(text: String) -> String:
	var parsed: Result = parse_text(text)
	return parsed.message if parsed.is_failure() else load_dict(parsed.value)


# A file's text as JSON: a Result, GO_ON with the parsed value (any JSON value), or FAILED saying what is wrong.
func parse_text(text: String) -> Reference:
	if text.strip_edges() == "":
		return Result.failed(error_text("the file is empty"))
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		return Result.failed(error_text(("not valid JSON (line %d: %s): the file is truncated or damaged, or holds NaN "
				+ "or Infinity, which JSON cannot represent") % [parsed.error_line, parsed.error_string]))
	return Result.go_on(parsed.result)


# Checks the format and version of a file or bundle; returns "" or what is wrong.
func check_format(data) -> String:
	if typeof(data) != TYPE_DICTIONARY or data.get("format") != FORMAT:
		return error_text("not a godot-ppo policy file (expected \"format\": \"%s\")" % FORMAT)
	var version = data.get("version")
	if not BlockCompiler.is_finite_number(version) or not float(version) in Contract.POLICY_VERSIONS:
		# A newer file than this export reads usually means the game was exported before godot-ppo was updated.
		return error_text(("unknown policy file version %s; this export of the game reads versions 1 to %d (re-export "
				+ "the game with this godot-ppo: godot-ppo export)") % [str(version), VERSION])
	return ""


func load_dict(data) -> String:
	var error := check_format(data)
	if error != "":
		return error
	if data.has("policies"):
		return error_text("it holds several policies (a bundle); give one policy's file here (RUN_DIR/policies/NAME.json)")
	var given = data.get("source")
	if typeof(given) == TYPE_DICTIONARY:
		source = given
	var name = data.get("policy_name", policy_name if policy_name != "" else null)
	if name != null and (typeof(name) != TYPE_STRING or name.strip_edges() == ""):
		return error_text("policy_name must be a non-empty string, got %s" % str(name).substr(0, 40))
	policy_name = name if name != null else ""
	for key in ["env", "observation_size", "action_keys", "action_rule", "layers"]:
		if not data.has(key):
			return error_text("the key \"%s\" is missing" % key)
	env = str(data["env"])
	var camera: bool = data.has("cnn") or data.has("image")
	if camera and float(data["version"]) < Contract.POLICY_CAMERA_VERSION:
		return error_text("a camera policy (\"image\", \"cnn\") needs version %d" % Contract.POLICY_CAMERA_VERSION)
	if not BlockCompiler.is_size(data["observation_size"]) and not (camera and data["observation_size"] == 0):
		return error_text("observation_size must be a whole number from 1 to %d, got %s"
				% [BlockCompiler.MAX_SIZE, str(data["observation_size"]).substr(0, 40)])
	var too_big := PolicyLimits.size_problem(data)
	if too_big != "":
		return error_text(too_big)
	observation_size = int(data["observation_size"])
	action_keys = data["action_keys"]
	action_rule = str(data["action_rule"])
	if not action_rule in ["clipped_mean", "argmax", "per_key"]:
		return error_text("unknown action_rule \"%s\" (expected clipped_mean, argmax or per_key)" % action_rule)
	error = PolicyActions.check_keys(action_keys)
	if error == "":
		error = PolicySampling.missing(action_keys)
	if error == "":
		error = _load_normalization(data.get("obs_normalization"))
	cnn = null
	var layers = data["layers"]
	var lstm_weights = data.get("lstm")
	var n_inputs := observation_size
	if error == "" and camera:
		cnn = ConvNetwork.new()
		error = cnn.build(data.get("image"), data.get("cnn"))
		if error == "":
			var first: Result = _padded_first(layers, lstm_weights)
			error = first.message
			if first.goes_on():
				layers = first.value[0]
				lstm_weights = first.value[1]
				n_inputs = 3 * BlockCompiler.chunk_count(cnn.features) + observation_size
	if error == "":
		var network := PolicyNetwork.new()
		network.settable = settable
		_n_outputs = PolicyActions.output_count(action_keys)
		error = network.build(layers, lstm_weights, n_inputs, _n_outputs)
		_network = network
		lstm = network.lstm
	return error_text(error) if error != "" else ""


# A camera policy's first matrix (layer 0's weight, or the LSTM's weight_ih when it comes first)
# takes cat([features, vector]); the features arrive in chunks whose last is zero-padded, so the
# matrix gets zero columns there: a Result, GO_ON with [layers, lstm] with that one matrix padded, or
# FAILED saying what is wrong.
func _padded_first(layers, lstm_weights) -> Reference:
	var n_in: int = cnn.features + observation_size
	var to: int = 3 * BlockCompiler.chunk_count(cnn.features)
	var in_lstm: bool = typeof(lstm_weights) == TYPE_DICTIONARY and lstm_weights.get("after_layer") == 0.0
	var holder = lstm_weights if in_lstm else (layers[0] if typeof(layers) == TYPE_ARRAY and not layers.empty() else null)
	var key := "weight_ih" if in_lstm else "weight"
	var matrix = holder.get(key) if typeof(holder) == TYPE_DICTIONARY else null
	var got := -1
	if typeof(matrix) == TYPE_ARRAY and not matrix.empty() and typeof(matrix[0]) == TYPE_ARRAY:
		got = matrix[0].size()
	if got != n_in:
		return Result.failed("the %s takes %d inputs, but the CNN gives %d features and the agent %d vector values" % [
				"LSTM" if in_lstm else "first layer", got, cnn.features, observation_size])
	var copy: Dictionary = holder.duplicate()
	copy[key] = ConvNetwork.padded_columns(matrix, cnn.features, to)
	if in_lstm:
		copy["input_size"] = to + observation_size
		return Result.go_on([layers, copy])
	var new_layers: Array = layers.duplicate()
	new_layers[0] = copy
	return Result.go_on([new_layers, lstm_weights])


func _load_normalization(norm) -> String:
	normalize = norm != null
	_normalization = null
	if not normalize:
		return ""
	_normalization = ObsNormalization.new()
	return _normalization.read(norm, observation_size)


# One recurrent state per agent (a recurrent policy; nothing to do for an MLP).
func set_agent_count(n: int) -> void:
	if lstm != null:
		lstm.set_agent_count(n)
	if cnn != null:
		cnn.set_agent_count(n)


# Forgets what agent `agent` saw: call it on the first observation of each of its episodes.
func reset(agent: int) -> void:
	if lstm != null:
		lstm.reset(agent)
	if cnn != null:
		cnn.reset(agent)


# Checks the policy fits an agent of this game; returns "" or a message naming the mismatch (both
# lists of action keys, when they differ).
# `image`: the agent's image observation, {"key", "size": [H, W, C]} ({} for none).
func check_agent(game: String, obs_size: int, action_space: Dictionary, image: Dictionary = {}) -> String:
	if env != game:
		return error_text("it was trained on \"%s\", not \"%s\"" % [env, game])
	var seen := "" if cnn == null else "\"%s\" of %d x %d x %d" % [cnn.image_key, cnn.height, cnn.width, cnn.channels]
	var given := "" if image.empty() else "\"%s\" of %s" % [image["key"], PoolStringArray(image["size"]).join(" x ")]
	if seen != given and (cnn != null or not image.empty()):
		return error_text("it sees %s, the agent's camera gives %s" % [seen if seen != "" else "no image",
				given if given != "" else "none"])
	if obs_size != observation_size:
		return error_text("it expects %d observations, the agent gives %d" % [observation_size, obs_size])
	var mismatch := PolicyActions.mismatch(action_keys, action_space)
	return error_text(mismatch) if mismatch != "" else ""


# Raw network outputs (Gaussian means or logits) for one observation of agent `agent` (a recurrent
# policy steps that agent's state, a camera policy its frame stack; set_agent_count first): a flat
# Array, or a camera agent's get_obs() Dictionary. A camera policy's flat Array (--policy_forward)
# is the vector values, then one frame's H x W x C values 0..255.
func forward(obs, agent: int = 0) -> Array:
	var frame = null
	if cnn != null and typeof(obs) != TYPE_DICTIONARY:
		frame = PoolByteArray(obs.slice(observation_size, obs.size() - 1)) if obs.size() > observation_size else null
		obs = obs.slice(0, observation_size - 1) if observation_size > 0 else []
	elif cnn != null:
		frame = obs.get(cnn.image_key)
	obs = ConvNetwork.vector_values(obs)
	var x: Array = _normalization.apply(obs) if normalize else obs
	var chunks := BlockCompiler.to_chunks(x)
	if cnn != null:
		chunks = cnn.encode(frame, agent) + chunks
	return BlockCompiler.from_chunks(_network.run(chunks, agent), _n_outputs)


# The action for one observation of agent `agent` (see forward()), in the agent's terms.
func act(obs, agent: int = 0) -> Dictionary:
	return outputs_to_action(forward(obs, agent))


func outputs_to_action(outputs: Array) -> Dictionary:
	if _sampler != null:
		return PolicySampling.sample(action_keys, outputs, _sampler)
	return PolicyActions.to_action(action_keys, outputs)


# "policy file PATH (policy "NAME"): message": every error names the file, and the policy of a named one.
func error_text(message: String) -> String:
	var named := " (policy \"%s\")" % policy_name if policy_name != "" else ""
	return "policy file %s%s: %s" % [path if path != "" else "(in memory)", named, message]
