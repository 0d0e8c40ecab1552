extends Reference
# Runs a trained policy inside the engine: loads a policy file written by `godot-ppo export-policy`,
# checks it against an agent, normalises observations and runs the MLP forward pass in GDScript.
#
# The file is JSON (format "godot-ppo-policy", version 1):
#   env                 the game it was trained on
#   observation_size    length of an agent's flat observation
#   action_keys         [{"key", "action_type", "size"}] in the order the network's outputs are laid out
#   action_rule         "clipped_mean" (continuous: the Gaussian mean clipped to [-1, 1]),
#                       "argmax" (discrete: the most likely choice, per key) or "per_key" (keys of both
#                       kinds: the clipped mean for each continuous key, the argmax for each discrete one)
#   obs_normalization   null, or {"mean", "var", "epsilon", "clip"}: x = clip((obs - mean) / sqrt(var + epsilon))
#   layers              [{"weight": out x in rows, "bias": out, "activation": "tanh" | "linear"}]
#   lstm                null, or a recurrent policy's LSTM (lstm_cell.gd's weights plus "after_layer": k):
#                       layers [0, k) encode the observation, the LSTM carries one state per agent
#                       (set_agent_count; reset(agent) where its episode begins), layers [k, ...) are the heads
#
# Speed: block_compiler.gd packs each layer's weights into 3x3 Basis blocks and generates the forward
# pass as straight-line GDScript (one `block * chunk` term per block), as it does lstm_cell.gd's step.

const FORMAT := "godot-ppo-policy"
const VERSION := 1
const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const LstmCell = preload("res://addons/rl_sync/lstm_cell.gd")

var path := ""
var env := ""
var observation_size := 0
var action_keys := []
var action_rule := ""
var obs_mean := []
var obs_scale := []
var obs_clip := 0.0
var normalize := false
# The file's "source" (informational: run, checkpoint, global step...); {} when it has none.
var source := {}
# Per checked layer: {"weight": out x in rows, "bias": out values, "tanh": bool}
var _layers := []
var _n_outputs := 0
# The generated forward pass (see _compile): run() for the layers before the LSTM (all of them without
# one), run_head() for those after it.
var _compiled = null
# A recurrent policy's LSTM (lstm_cell.gd, one state per agent) and how many layers come before it.
var lstm = null
var _lstm_after := -1


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
	if data.get("version") != float(VERSION) and data.get("version") != VERSION:
		return _error("unknown policy file version %s; this game reads version %d (re-export it with this godot-ppo)"
				% [str(data.get("version")), VERSION])
	for key in ["env", "observation_size", "action_keys", "action_rule", "layers"]:
		if not data.has(key):
			return _error("the key \"%s\" is missing" % key)
	env = str(data["env"])
	observation_size = int(data["observation_size"])
	action_keys = data["action_keys"]
	action_rule = str(data["action_rule"])
	if not action_rule in ["clipped_mean", "argmax", "per_key"]:
		return _error("unknown action_rule \"%s\" (expected clipped_mean, argmax or per_key)" % action_rule)
	var error := _check_action_keys()
	if error != "":
		return error
	error = _load_normalization(data.get("obs_normalization"))
	if error != "":
		return error
	error = _load_lstm(data.get("lstm"))
	if error != "":
		return error
	return _load_layers(data["layers"])


func _load_lstm(weights) -> String:
	lstm = null
	_lstm_after = -1
	if weights == null:
		return ""
	if typeof(weights) != TYPE_DICTIONARY or not BlockCompiler.is_finite_number(weights.get("after_layer")):
		return _error("\"lstm\" must be null or the LSTM's weights with \"after_layer\"")
	var cell = LstmCell.new()
	var error: String = cell.load_weights(weights)
	if error != "":
		return _error(error)
	lstm = cell
	_lstm_after = int(weights["after_layer"])
	return ""


# One recurrent state per agent (a recurrent policy; nothing to do for an MLP).
func set_agent_count(n: int) -> void:
	if lstm != null:
		lstm.set_agent_count(n)


# Forgets what agent `agent` saw: call it on the first observation of each of its episodes.
func reset(agent: int) -> void:
	if lstm != null:
		lstm.reset(agent)


# Each action key needs a name, a kind and a size of at least 1.
func _check_action_keys() -> String:
	if typeof(action_keys) != TYPE_ARRAY or action_keys.empty():
		return _error("\"action_keys\" must be a non-empty list of {\"key\", \"action_type\", \"size\"}")
	for key in action_keys:
		if typeof(key) != TYPE_DICTIONARY or not key.has("key") or not key.get("action_type") in ["continuous", "discrete"] \
				or not BlockCompiler.is_finite_number(key.get("size")) or int(key["size"]) < 1:
			return _error("every action key needs \"key\", \"action_type\" (continuous or discrete) and \"size\" >= 1; got %s"
					% to_json(key))
	return ""


func _load_normalization(norm) -> String:
	normalize = norm != null
	if not normalize:
		return ""
	if typeof(norm) != TYPE_DICTIONARY or not norm.has("mean") or not norm.has("var"):
		return _error("obs_normalization needs \"mean\" and \"var\"")
	if norm["mean"].size() != observation_size or norm["var"].size() != observation_size:
		return _error("obs_normalization has %d means and %d variances for %d observations"
				% [norm["mean"].size(), norm["var"].size(), observation_size])
	var epsilon := float(norm.get("epsilon", 1e-8))
	obs_clip = float(norm.get("clip", 10.0))
	obs_mean = []
	obs_scale = []
	for i in range(observation_size):
		var mean = norm["mean"][i]
		var variance = norm["var"][i]
		if not BlockCompiler.is_finite_number(mean) or not BlockCompiler.is_finite_number(variance) or variance < 0:
			return _error("obs_normalization holds a value that is not a finite number (index %d)" % i)
		obs_mean.append(float(mean))
		obs_scale.append(1.0 / sqrt(float(variance) + epsilon))
	return ""


func _load_layers(layers) -> String:
	if typeof(layers) != TYPE_ARRAY or layers.empty():
		return _error("\"layers\" must be a non-empty list")
	_layers = []
	var n_in := observation_size
	if lstm != null and _lstm_after > layers.size() - 1:
		return _error("the LSTM comes after layer %d of %d: the heads need at least one layer after it"
				% [_lstm_after, layers.size()])
	for l in range(layers.size()):
		var layer = layers[l]
		if l == _lstm_after:
			if n_in != lstm.input_size:
				return _error("the LSTM takes %d inputs, but the layers before it give %d" % [lstm.input_size, n_in])
			var first_row = layer.get("weight")[0] if typeof(layer) == TYPE_DICTIONARY \
					and typeof(layer.get("weight")) == TYPE_ARRAY and not layer.get("weight").empty() else null
			if typeof(first_row) == TYPE_ARRAY and first_row.size() != lstm.hidden_size:
				return _error("the recurrent state size does not match: the LSTM's state has %d values (hidden_size), "
						% lstm.hidden_size + "but layer %d after it takes %d inputs" % [l, first_row.size()])
			n_in = lstm.hidden_size
		var weight = layer.get("weight") if typeof(layer) == TYPE_DICTIONARY else null
		var bias = layer.get("bias") if typeof(layer) == TYPE_DICTIONARY else null
		if typeof(weight) != TYPE_ARRAY or typeof(bias) != TYPE_ARRAY or weight.empty():
			return _error("layer %d needs a \"weight\" matrix and a \"bias\" vector" % l)
		var n_out: int = weight.size()
		if bias.size() != n_out:
			return _error("layer %d has %d weight rows but %d biases" % [l, n_out, bias.size()])
		for row in weight:
			if typeof(row) != TYPE_ARRAY or row.size() != n_in:
				return _error("layer %d expects %d inputs (the size of the previous layer), got a row of %s"
						% [l, n_in, str(row.size()) if typeof(row) == TYPE_ARRAY else "non-list"])
			for w in row:
				if not BlockCompiler.is_finite_number(w):
					return _error("layer %d holds a weight that is not a finite number (NaN or infinity)" % l)
		for b in bias:
			if not BlockCompiler.is_finite_number(b):
				return _error("layer %d holds a bias that is not a finite number (NaN or infinity)" % l)
		var activation := str(layer.get("activation", "linear"))
		if not activation in ["tanh", "linear"]:
			return _error("layer %d has the unknown activation \"%s\" (expected tanh or linear)" % [l, activation])
		_layers.append({"weight": weight, "bias": bias, "tanh": activation == "tanh"})
		n_in = n_out
	var n_actions := 0
	for key in action_keys:
		n_actions += int(key["size"])
	if n_in != n_actions:
		return _error("the network has %d outputs but action_keys need %d" % [n_in, n_actions])
	_n_outputs = n_in
	return _compile()


# Writes the whole forward pass as straight-line code:
#   var h0_0: Vector3 = b0_0 + w0_0_0 * x0 + w0_0_1 * x1 + ...;  h0_0 = Vector3(tanh(h0_0.x), ...)
func _compile() -> String:
	_compiled = null
	var code := BlockCompiler.new()
	var split := _layers.size() if lstm == null else _lstm_after
	_function(code, "run", 0, split)
	if lstm != null:
		_function(code, "run_head", split, _layers.size())
	_compiled = code.compile()
	if _compiled == null:
		return _error("internal error: the generated forward pass does not compile (please report it)")
	return ""


# `func name(c: Array) -> Array` running layers [from, to) on the chunks c (no layer: returns c as
# it is).
func _function(code, function_name: String, from: int, to: int) -> void:
	code.line("func %s(c: Array) -> Array:" % function_name)
	if from == to:
		code.line("\treturn c")
		return
	for bi in range(BlockCompiler.chunk_count(_layers[from]["weight"][0].size())):
		code.line("\tvar x%d: Vector3 = c[%d]" % [bi, bi])
	var previous := "x"
	for l in range(from, to):
		var weight: Array = _layers[l]["weight"]
		var n_out := weight.size()
		var n_in: int = weight[0].size()
		var current := "h%d_" % l
		for bo in range(BlockCompiler.chunk_count(n_out)):
			var terms := PoolStringArray()
			for bi in range(BlockCompiler.chunk_count(n_in)):
				var block := BlockCompiler.block(weight, 0, n_out, n_in, bo, bi)
				terms.append("%s * %s%d" % [code.basis("w%d_%d_%d" % [l, bo, bi], block), previous, bi])
			var bias := BlockCompiler.chunk_at(_layers[l]["bias"], 0, n_out, bo)
			var h := "%s%d" % [current, bo]
			code.line("\tvar %s: Vector3 = %s + %s" % [h, code.vector("b%d_%d" % [l, bo], bias), terms.join(" + ")])
			if _layers[l]["tanh"]:
				code.line("\t%s = Vector3(tanh(%s.x), tanh(%s.y), tanh(%s.z))" % [h, h, h, h])
		previous = current
	var outputs := PoolStringArray()
	for bo in range(BlockCompiler.chunk_count(_layers[to - 1]["weight"].size())):
		outputs.append("%s%d" % [previous, bo])
	code.line("\treturn [%s]" % outputs.join(", "))


# Checks the policy fits an agent of this game; returns "" or a message naming the mismatch (both
# lists of action keys, when they differ).
func check_agent(game: String, obs_size: int, action_space: Dictionary) -> String:
	if env != game:
		return _error("it was trained on \"%s\", not \"%s\"" % [env, game])
	if obs_size != observation_size:
		return _error("it expects %d observations, the agent gives %d" % [observation_size, obs_size])
	var matches := action_keys.size() == action_space.size()
	for key in action_keys:
		var name := str(key["key"])
		if not action_space.has(name) or action_space[name]["action_type"] != key["action_type"] \
				or int(action_space[name]["size"]) != int(key["size"]):
			matches = false
	if not matches:
		var theirs := []
		for key in action_keys:
			theirs.append([str(key["key"]), key["action_type"], int(key["size"])])
		var ours := []
		for name in action_space:
			ours.append([str(name), action_space[name]["action_type"], int(action_space[name]["size"])])
		return _error("its action keys %s do not match the game's %s" % [key_list(theirs), key_list(ours)])
	return ""


# [[key, kind, size], ...] as "[jump (discrete, 2), move (continuous, 2)]", sorted by key.
static func key_list(keys: Array) -> String:
	var words := []
	for entry in keys:
		words.append("%s (%s, %d)" % entry)
	words.sort()
	return "[" + PoolStringArray(words).join(", ") + "]"


# Raw network outputs (Gaussian means or logits) for one flat observation of agent `agent` (a
# recurrent policy steps that agent's state; set_agent_count first).
func forward(obs: Array, agent: int = 0) -> Array:
	var x := obs
	if normalize:
		x = []
		for i in range(observation_size):
			x.append(clamp((obs[i] - obs_mean[i]) * obs_scale[i], -obs_clip, obs_clip))
	var chunks: Array = _compiled.run(BlockCompiler.to_chunks(x))
	if lstm != null:
		chunks = _compiled.run_head(lstm.step_chunks(agent, chunks))
	return BlockCompiler.from_chunks(chunks, _n_outputs)


# The action for one flat observation of agent `agent`, in the agent's terms.
func act(obs: Array, agent: int = 0) -> Dictionary:
	return outputs_to_action(forward(obs, agent))


func outputs_to_action(outputs: Array) -> Dictionary:
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


func _error(message: String) -> String:
	return "policy file %s: %s" % [path if path != "" else "(in memory)", message]
