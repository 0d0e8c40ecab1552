extends Reference
# Turns a network's weights into fast GDScript, for policy_network.gd's layers and lstm_cell.gd's gates.
#
# GDScript pays per operation, not per multiply, so two tricks: the weights are packed into 3x3 Basis blocks and the
# values into Vector3 chunks (ceil(n / 3) of them, the last one zero-padded), so one Basis * Vector3 does 9
# multiply-adds natively, about 5x faster than a scalar loop; and the step is generated at load as straight-line
# GDScript (one `block * chunk` term per block, every block and bias in a member variable): no loop, no Array
# indexing and no method-call lookup, about 3x faster again than looping over the blocks.
#
# Use: declare each block and bias with basis() and vector() (each returns the member's name; with a `source`,
# weights_setter.gd's expression of it, the script's set_weights(v) sets it from a flat buffer; row_terms() declares
# a row's blocks and gives its terms), write the functions with line() (a long sum with sum_line()), next_script()
# between two scripts, then compile(): one instance per script.
#
# Load time: GDScript 3.2's reload() grows with the square of a script's members and of a function's statements (10k
# blocks compile in 0.3 s, 20k in 1.1 s, 55k in 14 s), so one script holds at most BLOCKS_PER_SCRIPT blocks: a
# bigger network is compiled as several scripts (row_ranges() splits a layer's output rows among them; run_joined()
# runs them) and loads in time linear in its size. Wide rows: one output chunk whose sum has more than
# BLOCKS_PER_SCRIPT blocks (a layer of more than 6,144 inputs) is split too: row_terms() writes its blocks as parts,
# each a script of its own that sums about equal shares of at most BLOCKS_PER_SCRIPT blocks, reading its inputs
# straight from the arrays (`w7 * c[7]`), and the row's sum is the bias plus one `part.run(c)` per part. A policy
# file of 12 -> 65,536 -> 2 loads in seconds instead of minutes (docs/watching.md gives the figures).

# The largest size a policy file may declare (a layer's inputs or outputs, a camera's CNN features included; bounds.py's
# LAYER_SIZE is the same bound): far above any network the engine runs at speed, far below what would exhaust memory.
const Contract = preload("res://addons/rl_sync/contract.gd")
const MAX_SIZE := Contract.MAX_LAYER_SIZE
# The most weights a policy file holds (its layers, LSTM and CNN together), counted from its declared sizes before
# any is read: loading takes about 3 us a weight (bounds.py's POLICY_WEIGHTS).
const MAX_WEIGHTS := Contract.MAX_POLICY_WEIGHTS
# The largest policy file read: 16 bytes for each of MAX_WEIGHTS weights (the trainer writes 12 to 15), checked
# before the file is read (python_trainer/engine/policy_format.py's MAX_FILE_BYTES).
const MAX_FILE_BYTES := Contract.POLICY_BYTES_PER_WEIGHT * MAX_WEIGHTS
# The most layers a policy file holds (dense layers and a camera policy's convolutions together; policy_format.py's
# MAX_LAYERS is the same bound): the compiled network's load time grows with its weights (docs/watching.md's figures).
const MAX_LAYERS := Contract.MAX_POLICY_LAYERS
# The most blocks one generated script holds (see "Load time" above): 2048 compile in about 0.02 s.
const BLOCKS_PER_SCRIPT := 2048
const TERMS_PER_LINE := 96  # the longest sum written on one line: longer ones go on in `+=` lines
const WeightsSetter = preload("res://addons/rl_sync/weights_setter.gd")

var _members := PoolStringArray()
var _lines := PoolStringArray()
var _values := {}
var _setters := PoolStringArray()  # "member = source" of the script being written (weights_setter.gd)
# The scripts written before the current one: their parts, each [members, lines, values], kept alive until the last
# script is made (see compile()), and their instances (null: did not compile).
var _finished := []
var _instances := []
var _failed := false  # a part (see row_terms()) did not compile


func basis(name: String, value: Basis, source := "") -> String:
	_members.append("var %s: Basis" % name)
	_values[name] = value
	if source != "": _setters.append("%s = %s" % [name, source])
	return name


func vector(name: String, value: Vector3, source := "") -> String:
	_members.append("var %s: Vector3" % name)
	_values[name] = value
	if source != "": _setters.append("%s = %s" % [name, source])
	return name


func line(text: String) -> void:
	_lines.append(text)


# var name: Vector3 = first + terms..., TERMS_PER_LINE terms a line.
func sum_line(indent: String, name: String, first: String, terms: PoolStringArray) -> void:
	for start in range(0, terms.size(), TERMS_PER_LINE):
		var part := PoolStringArray()
		for t in range(start, min(start + TERMS_PER_LINE, terms.size())):
			part.append(terms[t])
		if start == 0:
			line("%svar %s: Vector3 = %s + %s" % [indent, name, first, part.join(" + ")])
		else:
			line("%s%s += %s" % [indent, name, part.join(" + ")])


# The terms of the sum of blocks[i] * inputs[i] (one output chunk) in the script being written, each
# block a member named prefix_i: or, past BLOCKS_PER_SCRIPT blocks, one `prefix_pK.run(args)` per part
# (see "Wide rows"), a script that reads its inputs as `part_inputs` (["c[0]", ...]) from `args` ("c"),
# the arrays of the function that calls it, which then needs no `inputs`. `sources`: each block's (basis()).
func row_terms(prefix: String, blocks: Array, inputs, part_inputs, args: String, sources := []) -> PoolStringArray:
	var terms := PoolStringArray()
	if not is_wide(blocks.size()):
		for i in range(blocks.size()):
			terms.append("%s * %s" % [basis("%s_%d" % [prefix, i], blocks[i], "" if sources.empty() else sources[i]), inputs[i]])
		return terms
	for range_ in column_ranges(blocks.size()):
		var outer := [_members, _lines, _values, _setters]
		_members = PoolStringArray()
		_setters = PoolStringArray()
		_lines = PoolStringArray(["func run(%s) -> Vector3:" % args])
		_values = {}
		var part := PoolStringArray()
		for i in range(range_[0], range_[1]):
			part.append("%s * %s" % [basis("w%d" % i, blocks[i], "" if sources.empty() else sources[i]), part_inputs[i]])
		sum_line("\t", "s", "Vector3()", part)
		line("\treturn s")
		var instance = _instance()
		_failed = _failed or instance == null
		_finished.append([_members, _lines, _values])
		_members = outer[0]
		_lines = outer[1]
		_values = outer[2]
		_setters = outer[3]
		var name := "%s_p%d" % [prefix, range_[0]]
		if not sources.empty(): _setters.append("%s.set_weights(v)" % name)
		_members.append("var %s" % name)
		_values[name] = instance
		terms.append("%s.run(%s)" % [name, args])
	return terms


# Ends the script being written (if anything was) and makes it: what follows goes into a new one.
func next_script() -> void:
	if _lines.empty() and _members.empty():
		return
	_instances.append(_instance())
	_finished.append([_members, _lines, _values])
	_members = PoolStringArray()
	_lines = PoolStringArray()
	_values = {}
	_setters = PoolStringArray()


# An instance of each generated script, in the order written, or null when one does not compile (a bug in the
# generator: the caller words the error). Each script is made as soon as it is written, and every script's values
# stay alive until the last is made: freeing them between two scripts left holes that the next script's blocks
# filled in scattered order, which made a 32 x 128 network's step 1.6x slower (cache misses).
func compile():
	var instances := _instances + [_instance()]
	return null if instances.has(null) or _failed else instances


func _instance():
	var script := GDScript.new()
	script.source_code = "extends Reference\n\n%s\n\n%s\n%s" % [_members.join("\n"), _lines.join("\n"),
			WeightsSetter.function_source(_setters)]
	if script.reload() != OK:
		return null
	var instance = script.new()
	for name in _values:
		instance.set(name, _values[name])
	return instance


# run(x) of each of `scripts` on the same input, their outputs joined: the output rows of a layer
# split by row_ranges().
static func run_joined(scripts: Array, x) -> Array:
	if scripts.size() == 1:
		return scripts[0].run(x)
	var joined := []
	for script in scripts:
		joined += script.run(x)
	return joined


# Splits n_rows output chunks, each costing `cost` blocks (row_cost()), into consecutive ranges
# [from, to] of at most BLOCKS_PER_SCRIPT blocks (at least one row each), one script each.
static func row_ranges(n_rows: int, cost: int) -> Array:
	var per := int(max(1, BLOCKS_PER_SCRIPT / max(1, cost)))
	var ranges := []
	for start in range(0, n_rows, per):
		ranges.append([start, int(min(start + per, n_rows))])
	return ranges


# A sum of n_blocks blocks is written as parts (row_terms()).
static func is_wide(n_blocks: int) -> bool:
	return n_blocks > BLOCKS_PER_SCRIPT


# What a sum of n_blocks blocks costs the script that holds it: its blocks, or a wide one's parts.
static func row_cost(n_blocks: int) -> int:
	return column_ranges(n_blocks).size() if is_wide(n_blocks) else n_blocks


# n_blocks as consecutive ranges [from, to) of about equal size, at most BLOCKS_PER_SCRIPT each.
static func column_ranges(n_blocks: int) -> Array:
	var n := int(ceil(n_blocks / float(BLOCKS_PER_SCRIPT)))
	var ranges := []
	for i in range(n):
		ranges.append([n_blocks * i / n, n_blocks * (i + 1) / n])
	return ranges


# Block (bo, bi) of the n_rows rows of `matrix` from `first_row` on: entry (r, c) is
# matrix[first_row + 3*bo + r][3*bi + c], zero past n_rows rows or n_columns columns.
static func block(matrix: Array, first_row: int, n_rows: int, n_columns: int, bo: int, bi: int) -> Basis:
	# Basis(x, y, z) takes columns; column c holds the weights of input 3*bi + c.
	var columns := []
	for c in range(3):
		var column := Vector3()
		for r in range(3):
			var row := 3 * bo + r
			var col := 3 * bi + c
			if row < n_rows and col < n_columns:
				column[r] = float(matrix[first_row + row][col])
		columns.append(column)
	return Basis(columns[0], columns[1], columns[2])


# Chunk k of the n values of `values` from `first` on (a bias lined up with block row k).
static func chunk_at(values: Array, first: int, n: int, k: int) -> Vector3:
	var v := Vector3()
	for r in range(3):
		if 3 * k + r < n:
			v[r] = float(values[first + 3 * k + r])
	return v


# How many Vector3 chunks hold n values.
static func chunk_count(n: int) -> int:
	return int(ceil(n / 3.0))


# `values` in Vector3 chunks, the last zero-padded: three values a constructor (setting them one at a time cost 3x).
static func to_chunks(values: Array) -> Array:
	var chunks := []
	var whole := values.size() - values.size() % 3
	for start in range(0, whole, 3):
		chunks.append(Vector3(values[start], values[start + 1], values[start + 2]))
	if whole < values.size():  # the ternary reads values[whole + 1] only when it exists
		chunks.append(Vector3(values[whole], values[whole + 1] if whole + 1 < values.size() else 0.0, 0.0))
	return chunks


# The first n values held in `chunks`, as a flat Array.
static func from_chunks(chunks: Array, n: int) -> Array:
	var values := []
	for chunk in chunks:
		values += [chunk.x, chunk.y, chunk.z]
	values.resize(n)
	return values


# Every number that goes into a block is checked with this first: a NaN would spread through the step.
static func is_finite_number(x) -> bool:
	return (typeof(x) == TYPE_REAL or typeof(x) == TYPE_INT) and not is_nan(x) and not is_inf(x)


# Every size a policy file declares (observations, LSTM sizes, action keys) is checked with this before anything is
# allocated from it, then against the arrays it describes: a whole number from 1 to MAX_SIZE (policy_format.py's).
static func is_size(x) -> bool:
	return is_finite_number(x) and x == floor(x) and x >= 1 and x <= MAX_SIZE
