extends SceneTree
# Runs addons/rl_sync/weights_setter.gd outside any game, for the pytest check that a compiled policy given
# another policy's weights computes what that policy computes (tests/test_weights_setter.py) and for the
# cost of an update against a load and a forward pass (scripts/bench_weights.py):
#
#   godot3-server --path godot_project -s tests/weights_parity.gd --weights_case=CASE.json
#       CASE.json: {"target": B.json, "source": A.json or null, "buffer": FILE (a weights message:
#       var2bytes of a PoolRealArray, as the trainer sends it), "observations": [[...], ...],
#       "settable": false to load B without its setter (default true)}
#       B is loaded and compiled, then set from the buffer; prints one line {"count": B's weight count,
#       "error": what set_weights said, "outputs": B's forward pass on each observation, "log_std": B's
#       continuous keys' log-stds, "source_outputs": A's own forward pass (when given)}
#   ... --weights_bench=N
#       prints {"bench": {"weights", "update_us", "load_us", "settable_load_us", "forward_us"}}: the
#       medians of N updates of B (bytes2var of the message, then set_weights), of a few loads of A's
#       text as --policy loads a file (JSON, checks, compile) and as the in-engine actors do (the
#       setter compiled too), and of N forward passes of one observation by B and by B loaded for
#       playback (no setter: today's forward pass), interleaved ("playback_forward_us").
# A bad case prints "weights_parity: error: ..." on stderr and exits 1.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const WeightsSetter = preload("res://addons/rl_sync/weights_setter.gd")

const LOADS := 5


func _initialize() -> void:
	var case = _read_json(RlArgs.get_string("weights_case", ""))
	if typeof(case) != TYPE_DICTIONARY:
		_fail("give --weights_case=FILE.json (a JSON object)")
		return
	var target := PolicyRunner.new()
	target.settable = case.get("settable", true)
	var error := target.load_file(case["target"])
	if error != "":
		_fail(error)
		return
	var file := File.new()
	if file.open(case["buffer"], File.READ) != OK:
		_fail("cannot read %s" % case["buffer"])
		return
	var message := file.get_buffer(file.get_len())
	file.close()
	target.set_agent_count(1)
	var bench := int(RlArgs.get_string("weights_bench", "0"))
	if bench > 0:
		_bench(target, message, case, bench)
		quit(0)
		return
	var result := {"count": WeightsSetter.count(target), "error": WeightsSetter.apply(target, bytes2var(message))}
	result["outputs"] = _outputs(target, case["observations"])
	var log_std := []
	for key in target.action_keys:
		if key["action_type"] == "continuous":
			log_std += key.get("log_std", [])
	result["log_std"] = log_std
	if case.get("source") != null:
		var source := PolicyRunner.new()
		error = source.load_file(case["source"])
		if error != "":
			_fail(error)
			return
		result["source_outputs"] = _outputs(source, case["observations"])
	print(to_json(result))
	quit(0)


func _outputs(runner, observations: Array) -> Array:
	var outputs := []
	for obs in observations:
		outputs.append(runner.forward(obs))
	return outputs


func _bench(target, message: PoolByteArray, case: Dictionary, n: int) -> void:
	var update := []
	for _i in range(n):
		var start := OS.get_ticks_usec()
		var error: String = WeightsSetter.apply(target, bytes2var(message))
		update.append(OS.get_ticks_usec() - start)
		if error != "":
			_fail(error)
			return
	var file := File.new()
	file.open(case["source"], File.READ)
	var text := file.get_as_text()
	file.close()
	var loads := [[], []]  # as --policy loads it, and with the setter (as the in-engine actors load it)
	for _i in range(LOADS):
		for settable in [0, 1]:
			var runner := PolicyRunner.new()
			runner.settable = settable == 1
			var start := OS.get_ticks_usec()
			var error := runner.load_text(text)
			loads[settable].append(OS.get_ticks_usec() - start)
			if error != "":
				_fail(error)
				return
	var playback := PolicyRunner.new()  # B as --policy loads it (no setter): the forward pass of today
	playback.load_text(text)
	var forward := [[], []]  # the two interleaved, so that the machine's load weighs on both alike
	var obs: Array = case["observations"][0]
	for _i in range(n):
		for which in [0, 1]:
			var runner = target if which == 0 else playback
			var start := OS.get_ticks_usec()
			runner.forward(obs)
			forward[which].append(OS.get_ticks_usec() - start)
	print(to_json({"bench": {"weights": WeightsSetter.count(target), "update_us": _median(update),
			"load_us": _median(loads[0]), "settable_load_us": _median(loads[1]), "forward_us": _median(forward[0]),
			"playback_forward_us": _median(forward[1])}}))


static func _median(values: Array) -> float:
	values.sort()
	var n := values.size()
	return values[n / 2] if n % 2 == 1 else 0.5 * (values[n / 2 - 1] + values[n / 2])


func _read_json(path: String):
	var file := File.new()
	if path == "" or file.open(path, File.READ) != OK:
		return null
	var parsed := JSON.parse(file.get_as_text())
	file.close()
	return parsed.result if parsed.error == OK else null


func _fail(message: String) -> void:
	printerr("weights_parity: error: " + message)
	quit(1)
