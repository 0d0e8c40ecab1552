extends Reference
# One LSTM layer's forward step in GDScript, with one hidden state per agent: what a recurrent policy
# runs between its encoder and its heads inside the engine.
#
# The weights are PyTorch's nn.LSTM (one layer), as python_trainer/variants/recurrent.py's export_weights()
# writes them:
#   {"input_size": I, "hidden_size": H,
#    "weight_ih": 4H rows x I, "weight_hh": 4H rows x H,    rows in PyTorch's gate order i, f, g, o
#    "bias": 4H}                                           bias_ih + bias_hh (or both, given apart)
# and one step computes, per agent, exactly what torch.nn.LSTM does:
#   i = sigmoid(W_ii x + W_hi h + b_i)    f = sigmoid(W_if x + W_hf h + b_f)
#   g = tanh(W_ig x + W_hg h + b_g)       o = sigmoid(W_io x + W_ho h + b_o)
#   c' = f * c + i * g                    h' = o * tanh(c')
#
# Use: load_weights(dict) -> "" or an error; set_agent_count(n); each decision step
# step(agent, x) -> h' (an Array of H floats); reset(agent) when that agent's episode begins. Values
# can also stay in Vector3 chunks (step_chunks), which is how policy_network.gd's layers hold them.
#
# Speed: block_compiler.gd packs the weights into 3x3 Basis blocks and generates the step as
# straight-line GDScript (no loop, no Array indexing of weights). Each gate is packed on its own, so
# a chunk of the hidden state lines up with the same chunk of every gate; padding rows are zero, which
# keeps padded components of c and h at exactly 0.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const Result = preload("res://addons/rl_sync/result.gd")

var input_size := 0
var hidden_size := 0
# Per agent: [h chunks (Array of Vector3), c chunks (Array of Vector3), and two spare arrays of
# the same size that the next step writes its new h and c into].
var _states := []
# The generated step, as scripts that each compute some chunks of the new state (see _compile).
var _pieces := []


# Checks and packs the weights, then compiles the step; returns "" or what is wrong.
func load_weights(weights: Dictionary) -> String:
	_pieces = []
	for key in ["input_size", "hidden_size", "weight_ih", "weight_hh"]:
		if not weights.has(key):
			return "LSTM weights: the key \"%s\" is missing" % key
	# Sizes first, then the arrays they describe, and only then anything allocated from them.
	for key in ["input_size", "hidden_size"]:
		if not BlockCompiler.is_size(weights[key]):
			return "LSTM weights: %s must be a whole number from 1 to %d, got %s" \
					% [key, BlockCompiler.MAX_SIZE, str(weights[key]).substr(0, 40)]
	input_size = int(weights["input_size"])
	hidden_size = int(weights["hidden_size"])
	var error := _check_matrix(weights["weight_ih"], "weight_ih", 4 * hidden_size, input_size)
	if error == "":
		error = _check_matrix(weights["weight_hh"], "weight_hh", 4 * hidden_size, hidden_size)
	if error != "":
		return error
	var bias: Result = _summed_bias(weights)
	if bias.is_failure():
		return bias.message
	error = _compile(weights["weight_ih"], weights["weight_hh"], bias.value)
	set_agent_count(_states.size())
	return error


# Allocates (or drops) per-agent states; every agent starts at zero.
func set_agent_count(n: int) -> void:
	_states = []
	for _i in range(n):
		_states.append(_zero_state())
	reset_all()


func agent_count() -> int:
	return _states.size()


# Zeroes one agent's h and c: call it when that agent's episode begins, before its first step.
func reset(agent: int) -> void:
	_states[agent] = _zero_state()


func reset_all() -> void:
	for agent in range(_states.size()):
		reset(agent)


# One step for one agent: x is its input (input_size floats); returns its new h (hidden_size floats).
func step(agent: int, x: Array) -> Array:
	return BlockCompiler.from_chunks(step_chunks(agent, BlockCompiler.to_chunks(x)), hidden_size)


# The same with values in Vector3 chunks (ceil(size / 3) of them, the last one zero-padded).
func step_chunks(agent: int, x_chunks: Array) -> Array:
	var state: Array = _states[agent]
	var h: Array = state[2]
	var c: Array = state[3]
	for piece in _pieces:
		piece.run(x_chunks, state[0], state[1], h, c)
	# The old state's arrays take the next step's new state (no allocation in the step).
	state[2] = state[0]
	state[3] = state[1]
	state[0] = h
	state[1] = c
	return h


func _zero_state() -> Array:
	var h := []
	var c := []
	for _k in range(BlockCompiler.chunk_count(hidden_size)):
		h.append(Vector3())
		c.append(Vector3())
	return [h, c, h.duplicate(), c.duplicate()]


# The bias, bias_ih + bias_hh: a Result, GO_ON with 4H floats, or FAILED saying what is wrong.
func _summed_bias(weights: Dictionary) -> Reference:
	var parts := []
	if weights.has("bias"):
		parts.append(weights["bias"])
	else:
		for key in ["bias_ih", "bias_hh"]:
			if weights.has(key):
				parts.append(weights[key])
	for part in parts:  # checked before the sum is allocated
		if typeof(part) != TYPE_ARRAY or part.size() != 4 * hidden_size:
			return Result.failed("LSTM weights: a bias must hold 4 x hidden_size = %d numbers" % (4 * hidden_size))
	var bias := []
	for _r in range(4 * hidden_size):
		bias.append(0.0)
	for part in parts:
		for r in range(part.size()):
			if not BlockCompiler.is_finite_number(part[r]):
				return Result.failed("LSTM weights: a bias holds a value that is not a finite number (index %d)" % r)
			bias[r] += float(part[r])
	return Result.go_on(bias)


func _check_matrix(matrix, name: String, rows: int, columns: int) -> String:
	if typeof(matrix) != TYPE_ARRAY or matrix.size() != rows:
		return "LSTM weights: %s must have 4 x hidden_size = %d rows" % [name, rows]
	for row in matrix:
		if typeof(row) != TYPE_ARRAY or row.size() != columns:
			return "LSTM weights: every row of %s must hold %d numbers" % [name, columns]
		for value in row:
			if not BlockCompiler.is_finite_number(value):
				return "LSTM weights: %s holds a value that is not a finite number (NaN or infinity)" % name
	return ""


# Generates, for the hidden chunks [first, last) (all of them in one script unless the LSTM is bigger
# than BlockCompiler.BLOCKS_PER_SCRIPT; a gate row longer than that is a sum of parts, which read x
# and h themselves: BlockCompiler.row_terms()):
#   func run(x: Array, h: Array, c: Array, h_out: Array, c_out: Array) -> void:
#       var x0: Vector3 = x[0] ...; var h0: Vector3 = h[0] ...
#       var i0: Vector3 = bi0 + wi0_0 * x0 + ... + ui0_0 * h0 + ...     (and f, g, o)
#       ... sigmoid / tanh per component, then c_out[k] = f*c + i*g; h_out[k] = o*tanh(c_out[k])
# The new state goes to other arrays (the agent's spares): every script reads the old h and c. Block
# row k of gate `gate` is rows gate*H + 3*k + r of the weights.
func _compile(weight_ih: Array, weight_hh: Array, bias: Array) -> String:
	var n_in := BlockCompiler.chunk_count(input_size)
	var n_h := BlockCompiler.chunk_count(hidden_size)
	var code := BlockCompiler.new()
	for range_ in BlockCompiler.row_ranges(n_h, 4 * BlockCompiler.row_cost(n_in + n_h)):
		code.next_script()
		_write_step(code, weight_ih, weight_hh, bias, range_[0], range_[1])
	var scripts = code.compile()
	if scripts == null:
		_pieces = []
		return "LSTM weights: internal error: the generated step does not compile (please report it)"
	_pieces = scripts
	return ""


func _write_step(code, weight_ih: Array, weight_hh: Array, bias: Array, first: int, last: int) -> void:
	code.line("func run(x: Array, h: Array, c: Array, h_out: Array, c_out: Array) -> void:")
	var n_in := BlockCompiler.chunk_count(input_size)
	var n_h := BlockCompiler.chunk_count(hidden_size)
	var wide := BlockCompiler.is_wide(n_in + n_h)
	var inputs := PoolStringArray()
	var part_inputs := PoolStringArray()
	for a in [["x", n_in], ["h", n_h]]:
		for bi in range(a[1]):
			inputs.append("%s%d" % [a[0], bi])
			part_inputs.append("%s[%d]" % [a[0], bi])
			if not wide:
				code.line("\tvar %s%d: Vector3 = %s[%d]" % [a[0], bi, a[0], bi])
	var gate_names := ["i", "f", "g", "o"]
	for k in range(first, last):
		for gate in range(4):
			var g: String = gate_names[gate]
			var rows := gate * hidden_size
			var blocks := []  # those of weight_ih, then weight_hh's
			for bi in range(n_in):
				blocks.append(BlockCompiler.block(weight_ih, rows, hidden_size, input_size, k, bi))
			for bi in range(n_h):
				blocks.append(BlockCompiler.block(weight_hh, rows, hidden_size, hidden_size, k, bi))
			var terms: PoolStringArray = code.row_terms("w%s%d" % [g, k], blocks, inputs, part_inputs, "x, h")
			var b: String = code.vector("b%s%d" % [g, k], BlockCompiler.chunk_at(bias, rows, hidden_size, k))
			code.sum_line("\t", "%s%d" % [g, k], b, terms)
		for g in ["i", "f", "o"]:
			var v := "%s%d" % [g, k]
			code.line("\t%s = Vector3(1.0 / (1.0 + exp(-%s.x)), 1.0 / (1.0 + exp(-%s.y)), 1.0 / (1.0 + exp(-%s.z)))"
					% [v, v, v, v])
		code.line("\tg%d = Vector3(tanh(g%d.x), tanh(g%d.y), tanh(g%d.z))" % [k, k, k, k])
		code.line("\tvar c%d: Vector3 = f%d * c[%d] + i%d * g%d" % [k, k, k, k, k])
	for k in range(first, last):
		code.line("\tc_out[%d] = c%d" % [k, k])
		code.line("\th_out[%d] = o%d * Vector3(tanh(c%d.x), tanh(c%d.y), tanh(c%d.z))" % [k, k, k, k, k])
