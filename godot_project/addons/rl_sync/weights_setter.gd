extends Reference
# New weights for a compiled policy, fast: what the in-engine actors (issue 58) get after every update.
#
# Loading a policy file costs about 3 us a weight (JSON, a check of every number, packing into Basis blocks,
# compiling the forward pass). The compiled forward pass depends only on the network's shape, so new weights of the
# same shape need none of that: each generated script of the forward pass (block_compiler.gd) also gets
# `func set_weights(v: PoolRealArray)`, straight-line code that assigns every block and bias member from the flat
# buffer, `w0_1_2 = Basis(Vector3(v[81], v[107], v[133]), ...)`, its indices fixed when it is written (the
# zero-padding of the edge blocks as 0.0). No JSON, no check of each number, no recompile: about 0.07 us a weight
# (scripts/bench_weights.py), and the numbers are the trainer's own float32s (python_trainer/engine/
# policy_weights.py builds the buffer). A script of many statements compiles in time that grows with their square,
# so a setter is split into functions of STATEMENTS_PER_FUNCTION statements, which set_weights() calls in turn (and a
# row summed by parts sets each part's members through the part's own setter).
#
# The setter costs the load about 4x its time (a setter statement compiles in about 100 us), so a network gets one
# only when asked (policy_network.gd's `settable`, which policy_set.gd and policy_runner.gd pass on): the in-engine
# actors ask, --policy playback does not.
#
# The order of the values (the wire's; policy_weights.py walks a policy dict the same way): for each layer in file
# order its weight row by row (one output unit's inputs each), then its bias; then each continuous key's log_std, in
# action_keys order; then, when the policy normalises its observations, their mean, then their var (epsilon and clip
# stay the file's). apply() writes the log-stds into the action keys' "log_std" Arrays in place, where
# policy_sampling.gd reads them, and the statistics into the runner's obs_normalization.gd. LSTM and camera (CNN)
# policies are refused: in-engine actors take MLP policies.

const STATEMENTS_PER_FUNCTION := 256
const MLP_ONLY := "in-engine actors take MLP policies; this one %s: train it with --no-in-engine"
const HAS_LSTM := "has an LSTM (--lstm)"
const HAS_CNN := "sees a camera through a CNN"
const INTERIOR := "Basis(Vector3(v[%d], v[%d], v[%d]), Vector3(v[%d], v[%d], v[%d]), Vector3(v[%d], v[%d], v[%d]))"


# The expression of block (bo, bi) (BlockCompiler.block()) of the n_out x n_in weight matrix stored row by row from
# v[offset]: Basis columns of three rows each, 0.0 past the matrix's edge.
static func block(offset: int, n_out: int, n_in: int, bo: int, bi: int) -> String:
	var first := offset + 3 * bo * n_in + 3 * bi
	if 3 * bo + 3 <= n_out and 3 * bi + 3 <= n_in:  # one format: most blocks, and the load's cost is per block
		return INTERIOR % [first, first + n_in, first + 2 * n_in, first + 1, first + 1 + n_in, first + 1 + 2 * n_in,
				first + 2, first + 2 + n_in, first + 2 + 2 * n_in]
	var columns := PoolStringArray()
	for c in range(3):
		var column := PoolStringArray()
		for r in range(3):
			var inside := 3 * bo + r < n_out and 3 * bi + c < n_in
			column.append("v[%d]" % (first + r * n_in + c) if inside else "0.0")
		columns.append("Vector3(%s)" % column.join(", "))
	return "Basis(%s)" % columns.join(", ")


# The expression of the bias chunk bo of the layer whose n_out x n_in weight starts at v[offset] (its bias follows
# it), or "" when offset is -1 (no setter).
static func bias(offset: int, n_out: int, n_in: int, bo: int) -> String:
	if offset < 0:
		return ""
	var values := PoolStringArray()
	for r in range(3):
		values.append("v[%d]" % (offset + n_out * n_in + 3 * bo + r) if 3 * bo + r < n_out else "0.0")
	return "Vector3(%s)" % values.join(", ")


# The source of `func set_weights(v: PoolRealArray) -> void` running `statements`, split into functions of at most
# STATEMENTS_PER_FUNCTION statements; "" when there are none.
static func function_source(statements: PoolStringArray) -> String:
	if statements.empty():
		return ""
	var calls := PoolStringArray(["func set_weights(v: PoolRealArray) -> void:"])
	var bodies := PoolStringArray()
	for start in range(0, statements.size(), STATEMENTS_PER_FUNCTION):
		var name := "_set_weights_%d" % (start / STATEMENTS_PER_FUNCTION)
		calls.append("\t%s(v)" % name)
		bodies.append("\n\nfunc %s(v: PoolRealArray) -> void:" % name)
		for i in range(start, min(start + STATEMENTS_PER_FUNCTION, statements.size())):
			bodies.append("\t" + statements[i])
	return "\n\n" + calls.join("\n") + bodies.join("\n") + "\n"


# Why `network` (policy_network.gd) cannot take n values ("" when it can).
static func refusal(network, n: int) -> String:
	if network.lstm != null:
		return MLP_ONLY % HAS_LSTM
	if not network.settable:
		return "this policy was compiled without its weights setter (load it with `settable` set: weights_setter.gd)"
	if n < network.weight_count():
		return "the network takes %d weights and biases, got %d values" % [network.weight_count(), n]
	return ""


# The number of float32 values of a weights message for `runner` (policy_runner.gd): its network's weights and
# biases, its continuous keys' log-stds, its observation statistics (mean and var).
static func count(runner) -> int:
	var n: int = runner._network.weight_count()
	for key in runner.action_keys:
		if key["action_type"] == "continuous":
			n += int(key["size"])
	return n + (2 * runner.observation_size if runner.normalize else 0)


# Sets `runner`'s weights from count() values in the order above; returns "" or a one-line error naming the file
# (then nothing changed).
static func apply(runner, values: PoolRealArray) -> String:
	if runner.cnn != null or runner.lstm != null:
		return runner.error_text(MLP_ONLY % (HAS_CNN if runner.cnn != null else HAS_LSTM))
	var expected := count(runner)
	if values.size() != expected:
		return runner.error_text(("a weights message holds %d values, but this policy takes %d (its layers, "
				+ "log-stds and observation statistics): the trainer and the game load different policies")
				% [values.size(), expected])
	var error: String = runner._network.set_weights(values)
	if error != "":
		return runner.error_text(error)
	var offset: int = runner._network.weight_count()
	for key in runner.action_keys:
		if key["action_type"] != "continuous":
			continue
		var size := int(key["size"])
		if typeof(key.get("log_std")) != TYPE_ARRAY or key["log_std"].size() != size:
			key["log_std"] = []
			key["log_std"].resize(size)
		for i in range(size):
			key["log_std"][i] = values[offset + i]
		offset += size
	if runner.normalize:
		runner._normalization.set_stats(values, offset)
	return ""
