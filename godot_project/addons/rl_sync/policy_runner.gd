extends Reference
# Runs a trained policy inside the engine: loads a policy file written by `godot-ppo export-policy`,
# checks it against an agent, normalises observations and runs the MLP forward pass in GDScript.
#
# The file is JSON (format "godot-ppo-policy", version 2; version 1 files, which know only tanh and
# linear layers, read the same way):
#   env                 the game it was trained on
#   observation_size    length of an agent's flat observation
#   action_keys         [{"key", "action_type", "size"}] in the order the network's outputs are laid out
#   action_rule         "clipped_mean" (continuous: the Gaussian mean clipped to [-1, 1]),
#                       "argmax" (discrete: the most likely choice, per key) or "per_key" (keys of both
#                       kinds: the clipped mean for each continuous key, the argmax for each discrete one)
#   obs_normalization   null, or {"mean", "var", "epsilon", "clip"}: x = clip((obs - mean) / sqrt(var + epsilon))
#   layers              [{"weight": out x in rows, "bias": out, "activation": "tanh" | "relu" | "sigmoid" | "linear"}]
#   lstm                null, or a recurrent policy's LSTM (lstm_cell.gd's weights plus "after_layer": k):
#                       layers [0, k) encode the observation, the LSTM carries one state per agent
#                       (set_agent_count; reset(agent) where its episode begins), layers [k, ...) are the heads
#
# The work is shared out: obs_normalization.gd normalises, policy_network.gd checks the layers and
# runs them (compiled to fast GDScript by block_compiler.gd), policy_actions.gd turns the outputs
# into actions. This file reads the file, checks it fits an agent, and runs the three in turn.

const FORMAT := "godot-ppo-policy"
const VERSION := 2
const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const ObsNormalization = preload("res://addons/rl_sync/obs_normalization.gd")
const PolicyActions = preload("res://addons/rl_sync/policy_actions.gd")
const PolicyNetwork = preload("res://addons/rl_sync/policy_network.gd")

var path := ""
var env := ""
var observation_size := 0
var action_keys := []
var action_rule := ""
var normalize := false
# The file's "source" (informational: run, checkpoint, global step...); {} when it has none.
var source := {}
# A recurrent policy's LSTM (lstm_cell.gd, one state per agent; null for an MLP).
var lstm = null
var _normalization: ObsNormalization = null
var _network: PolicyNetwork = null
var _n_outputs := 0


# Loads and validates the file; returns "" or a message naming the file and what is wrong.
func load_file(file_path: String) -> String:
	path = file_path
	var file := File.new()
	if not file.file_exists(file_path):
		return _error("the file does not exist")
	if file.open(file_path, File.READ) != OK:
		return _error("the file cannot be read")
	var text := file.get_as_text()
	file.close()
	return load_text(text)


# Loads a policy file's content (`path` names it in errors); returns "" or what is wrong.
func load_text(text: String) -> String:
	if text.strip_edges() == "":
		return _error("the file is empty")
	var parsed := JSON.parse(text)
	if parsed.error != OK:
		return _error(("not valid JSON (line %d: %s): the file is truncated or damaged, or holds NaN or Infinity, "
				+ "which JSON cannot represent") % [parsed.error_line, parsed.error_string])
	var given = parsed.result.get("source") if typeof(parsed.result) == TYPE_DICTIONARY else null
	source = given if typeof(given) == TYPE_DICTIONARY else {}
	return load_dict(parsed.result)


func load_dict(data) -> String:
	if typeof(data) != TYPE_DICTIONARY or data.get("format") != FORMAT:
		return _error("not a godot-ppo policy file (expected \"format\": \"%s\")" % FORMAT)
	var version = data.get("version")
	if not BlockCompiler.is_finite_number(version) or not float(version) in [1.0, float(VERSION)]:
		return _error("unknown policy file version %s; this game reads versions 1 to %d (re-export it with this godot-ppo)"
				% [str(version), VERSION])
	for key in ["env", "observation_size", "action_keys", "action_rule", "layers"]:
		if not data.has(key):
			return _error("the key \"%s\" is missing" % key)
	env = str(data["env"])
	if not BlockCompiler.is_size(data["observation_size"]):
		return _error("observation_size must be a whole number from 1 to %d, got %s"
				% [BlockCompiler.MAX_SIZE, str(data["observation_size"]).substr(0, 40)])
	observation_size = int(data["observation_size"])
	action_keys = data["action_keys"]
	action_rule = str(data["action_rule"])
	if not action_rule in ["clipped_mean", "argmax", "per_key"]:
		return _error("unknown action_rule \"%s\" (expected clipped_mean, argmax or per_key)" % action_rule)
	var error := PolicyActions.check_keys(action_keys)
	if error == "":
		error = _load_normalization(data.get("obs_normalization"))
	if error == "":
		var network := PolicyNetwork.new()
		_n_outputs = PolicyActions.output_count(action_keys)
		error = network.build(data["layers"], data.get("lstm"), observation_size, _n_outputs)
		_network = network
		lstm = network.lstm
	return _error(error) if error != "" else ""


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


# Forgets what agent `agent` saw: call it on the first observation of each of its episodes.
func reset(agent: int) -> void:
	if lstm != null:
		lstm.reset(agent)


# Checks the policy fits an agent of this game; returns "" or a message naming the mismatch (both
# lists of action keys, when they differ).
func check_agent(game: String, obs_size: int, action_space: Dictionary) -> String:
	if env != game:
		return _error("it was trained on \"%s\", not \"%s\"" % [env, game])
	if obs_size != observation_size:
		return _error("it expects %d observations, the agent gives %d" % [observation_size, obs_size])
	var mismatch := PolicyActions.mismatch(action_keys, action_space)
	return _error(mismatch) if mismatch != "" else ""


# Raw network outputs (Gaussian means or logits) for one flat observation of agent `agent` (a
# recurrent policy steps that agent's state; set_agent_count first).
func forward(obs: Array, agent: int = 0) -> Array:
	var x: Array = _normalization.apply(obs) if normalize else obs
	return BlockCompiler.from_chunks(_network.run(BlockCompiler.to_chunks(x), agent), _n_outputs)


# The action for one flat observation of agent `agent`, in the agent's terms.
func act(obs: Array, agent: int = 0) -> Dictionary:
	return outputs_to_action(forward(obs, agent))


func outputs_to_action(outputs: Array) -> Dictionary:
	return PolicyActions.to_action(action_keys, outputs)


func _error(message: String) -> String:
	return "policy file %s: %s" % [path if path != "" else "(in memory)", message]
