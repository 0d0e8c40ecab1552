extends Reference
# A policy file's network: its "layers" (and a recurrent policy's "lstm") checked, compiled into
# straight-line GDScript by block_compiler.gd, and run on Vector3 chunks for policy_runner.gd.
#
# Without an LSTM every layer runs in one go. With one, layers [0, k) encode the observation
# ("after_layer": k), the LSTM (lstm_cell.gd) carries one state per agent from step to step, and
# layers [k, ...) are the heads. Errors come back without the file's name: the runner adds it.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const LstmCell = preload("res://addons/rl_sync/lstm_cell.gd")
const WeightsSetter = preload("res://addons/rl_sync/weights_setter.gd")
# Each activation a layer may end with, as the expression that applies it to one value (%s); relu and
# sigmoid came with version 2 of the policy file (ONNX models imported from SB3 and other tools).
const ACTIVATIONS := {
	"linear": "",
	"relu": "max(%s, 0.0)",
	"tanh": "tanh(%s)",
	"sigmoid": "1.0 / (1.0 + exp(-%s))",
}

# A recurrent policy's LSTM (one state per agent) and how many layers come before it.
var lstm = null
var _lstm_after := -1
# The generated forward pass (see _compile): the layers before the LSTM (all of them without one) and
# those after it, each as stages. A stage is a list of compiled scripts, each with
# func run(c: Array) -> Array; their outputs, joined, are the next stage's input.
var _encoder := []
var _heads := []
var _weight_count := 0  # the values of the layers' weights and biases (set_weights())
# Set before build(): the generated scripts also get a setter of their weights (weights_setter.gd), which
# costs loading about 4x the time (in-engine actors want it, playback does not).
var settable := false


# Checks the LSTM's weights (null: none), then the layers for n_inputs observations and n_outputs
# network outputs, and compiles the forward pass; returns "" or what is wrong.
func build(layers, lstm_weights, n_inputs: int, n_outputs: int) -> String:
	var error := _load_lstm(lstm_weights)
	if error != "":
		return error
	return _load_layers(layers, n_inputs, n_outputs)


# The network's outputs, in chunks, for one observation in chunks; a recurrent policy steps agent
# `agent`'s state.
func run(chunks: Array, agent: int) -> Array:
	var out := _run_stages(_encoder, chunks)
	if lstm != null:
		out = _run_stages(_heads, lstm.step_chunks(agent, out))
	return out


func weight_count() -> int:
	return _weight_count


# New weights and biases of the same shape (the in-engine actors' update, weights_setter.gd): the first weight_count()
# of `values` in the policy file's order, set by the generated scripts: no check, no compile. "" or what is wrong.
func set_weights(values: PoolRealArray) -> String:
	var refused := WeightsSetter.refusal(self, values.size())
	if refused != "":
		return refused
	for stage in _encoder:
		for script in stage:
			script.set_weights(values)
	return ""


static func _run_stages(stages: Array, c: Array) -> Array:
	for stage in stages:
		c = BlockCompiler.run_joined(stage, c)
	return c


func _load_lstm(weights) -> String:
	lstm = null
	_lstm_after = -1
	if weights == null:
		return ""
	if typeof(weights) != TYPE_DICTIONARY or not BlockCompiler.is_finite_number(weights.get("after_layer")) \
			or weights["after_layer"] < 0:
		return "\"lstm\" must be null or the LSTM's weights with \"after_layer\" (a layer index >= 0)"
	var cell = LstmCell.new()
	var error: String = cell.load_weights(weights)
	if error != "":
		return error
	lstm = cell
	_lstm_after = int(weights["after_layer"])
	return ""


func _load_layers(layers, n_inputs: int, n_outputs: int) -> String:
	if typeof(layers) != TYPE_ARRAY or layers.empty():
		return "\"layers\" must be a non-empty list"
	# Per layer: {"weight": out x in rows, "bias": out values, "activation": one of ACTIVATIONS}, once checked.
	var checked := []
	var n_in := n_inputs
	_weight_count = 0
	if lstm != null and _lstm_after > layers.size() - 1:
		return "the LSTM comes after layer %d of %d: the heads need at least one layer after it" \
				% [_lstm_after, layers.size()]
	for l in range(layers.size()):
		var layer = layers[l]
		if l == _lstm_after:
			if n_in != lstm.input_size:
				return "the LSTM takes %d inputs, but the layers before it give %d" % [lstm.input_size, n_in]
			var first_row = layer.get("weight")[0] if typeof(layer) == TYPE_DICTIONARY \
					and typeof(layer.get("weight")) == TYPE_ARRAY and not layer.get("weight").empty() else null
			if typeof(first_row) == TYPE_ARRAY and first_row.size() != lstm.hidden_size:
				return "the recurrent state size does not match: the LSTM's state has %d values (hidden_size), " \
						% lstm.hidden_size + "but layer %d after it takes %d inputs" % [l, first_row.size()]
			n_in = lstm.hidden_size
		var error := _check_layer(layer, l, n_in)
		if error != "":
			return error
		checked.append({"weight": layer["weight"], "bias": layer["bias"],
				"activation": str(layer.get("activation", "linear")), "offset": _weight_count})
		_weight_count += layer["weight"].size() * (n_in + 1)
		n_in = layer["weight"].size()
	if n_in != n_outputs:
		return "the network has %d outputs but action_keys need %d" % [n_in, n_outputs]
	return _compile(checked)


# Layer l needs n_in inputs: a finite weight matrix with that many columns, a finite bias per row,
# and an activation we know.
func _check_layer(layer, l: int, n_in: int) -> String:
	var weight = layer.get("weight") if typeof(layer) == TYPE_DICTIONARY else null
	var bias = layer.get("bias") if typeof(layer) == TYPE_DICTIONARY else null
	if typeof(weight) != TYPE_ARRAY or typeof(bias) != TYPE_ARRAY or weight.empty():
		return "layer %d needs a \"weight\" matrix and a \"bias\" vector" % l
	if bias.size() != weight.size():
		return "layer %d has %d weight rows but %d biases" % [l, weight.size(), bias.size()]
	for row in weight:
		if typeof(row) != TYPE_ARRAY or row.size() != n_in:
			return "layer %d expects %d inputs (the size of the previous layer), got a row of %s" \
					% [l, n_in, str(row.size()) if typeof(row) == TYPE_ARRAY else "non-list"]
		for w in row:
			if not BlockCompiler.is_finite_number(w):
				return "layer %d holds a weight that is not a finite number (NaN or infinity)" % l
	for b in bias:
		if not BlockCompiler.is_finite_number(b):
			return "layer %d holds a bias that is not a finite number (NaN or infinity)" % l
	var activation := str(layer.get("activation", "linear"))
	if not activation in ACTIVATIONS:
		return "layer %d has the unknown activation \"%s\" (expected one of %s)" \
				% [l, activation, PoolStringArray(ACTIVATIONS.keys()).join(", ")]
	return ""


# Writes the forward pass as straight-line code:
#   var h0_0: Vector3 = b0_0 + w0_0_0 * x0 + w0_0_1 * x1 + ...;  h0_0 = Vector3(tanh(h0_0.x), ...)
# Consecutive layers share a script while their blocks fit in BlockCompiler.BLOCKS_PER_SCRIPT (a
# 64-wide MLP is one script); a bigger layer is a stage of its own, its output rows split among scripts
# (and a row of more than BLOCKS_PER_SCRIPT blocks among parts: BlockCompiler.row_terms()).
func _compile(layers: Array) -> String:
	var split := layers.size() if lstm == null else _lstm_after
	var code := BlockCompiler.new()
	# Each stage as how many scripts it has, the layers before the LSTM first.
	var encoder_sizes := _write_stages(code, layers, 0, split)
	var head_sizes := _write_stages(code, layers, split, layers.size())
	var scripts = code.compile()
	_encoder = []
	_heads = []
	if scripts == null:
		return "internal error: the generated forward pass does not compile (please report it)"
	var next := 0
	for n in encoder_sizes:
		_encoder.append(scripts.slice(next, next + n - 1))
		next += n
	for n in head_sizes:
		_heads.append(scripts.slice(next, next + n - 1))
		next += n
	return ""


# Writes the scripts of the stages that run layers [from, to); returns each stage's script count.
func _write_stages(code, layers: Array, from: int, to: int) -> Array:
	var sizes := []
	var l := from
	while l < to:
		var rows := BlockCompiler.chunk_count(layers[l]["weight"].size())
		var blocks_per_row := BlockCompiler.chunk_count(layers[l]["weight"][0].size())
		if rows * blocks_per_row > BlockCompiler.BLOCKS_PER_SCRIPT:
			var ranges := BlockCompiler.row_ranges(rows, BlockCompiler.row_cost(blocks_per_row))
			for range_ in ranges:
				_write_script(code, layers, l, l + 1, range_[0], range_[1])
			sizes.append(ranges.size())
			l += 1
			continue
		var end := l + 1
		var blocks := rows * blocks_per_row
		while end < to:
			blocks += BlockCompiler.chunk_count(layers[end]["weight"].size()) \
					* BlockCompiler.chunk_count(layers[end]["weight"][0].size())
			if blocks > BlockCompiler.BLOCKS_PER_SCRIPT:
				break
			end += 1
		_write_script(code, layers, l, end, 0, -1)
		sizes.append(1)
		l = end
	return sizes


# A new script with `func run(c: Array) -> Array` running layers [from, to) on the chunks c; with one
# layer, only its output chunks [row_from, row_to) (row_to -1: all of every layer's).
func _write_script(code, layers: Array, from: int, to: int, row_from: int, row_to: int) -> void:
	code.next_script()
	code.line("func run(c: Array) -> Array:")
	var n_chunks := BlockCompiler.chunk_count(layers[from]["weight"][0].size())
	var wide := BlockCompiler.is_wide(n_chunks)  # then alone in its script, its parts read c
	for bi in range(0 if wide else n_chunks):
		code.line("\tvar x%d: Vector3 = c[%d]" % [bi, bi])
	var previous := "x"
	var outputs := PoolStringArray()
	for l in range(from, to):
		var weight: Array = layers[l]["weight"]
		var n_out := weight.size()
		var n_in: int = weight[0].size()
		var current := "h%d_" % l
		var first := row_from if row_to != -1 else 0
		var last := row_to if row_to != -1 else BlockCompiler.chunk_count(n_out)
		outputs = PoolStringArray()
		var inputs := PoolStringArray()
		var part_inputs := PoolStringArray()
		for bi in range(BlockCompiler.chunk_count(n_in)):
			inputs.append("%s%d" % [previous, bi])
			if wide:
				part_inputs.append("c[%d]" % bi)
		var offset: int = layers[l]["offset"] if settable else -1  # in set_weights()'s values (-1: no setter)
		for bo in range(first, last):
			var blocks := []
			var sources := []
			for bi in range(BlockCompiler.chunk_count(n_in)):
				blocks.append(BlockCompiler.block(weight, 0, n_out, n_in, bo, bi))
				if settable: sources.append(WeightsSetter.block(offset, n_out, n_in, bo, bi))
			var terms: PoolStringArray = code.row_terms("w%d_%d" % [l, bo], blocks, inputs, part_inputs, "c", sources)
			var bias := BlockCompiler.chunk_at(layers[l]["bias"], 0, n_out, bo)
			var h := "%s%d" % [current, bo]
			code.sum_line("\t", h, code.vector("b%d_%d" % [l, bo], bias, WeightsSetter.bias(offset, n_out, n_in, bo)), terms)
			var f: String = ACTIVATIONS[layers[l]["activation"]]
			if f != "":
				code.line("\t%s = Vector3(%s, %s, %s)" % [h, f % (h + ".x"), f % (h + ".y"), f % (h + ".z")])
			outputs.append(h)
		previous = current
	code.line("\treturn [%s]" % outputs.join(", "))
