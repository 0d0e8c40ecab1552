extends SceneTree
# Runs a camera policy file (addons/rl_sync/policy_runner.gd with conv_network.gd) outside any game,
# for the pytest parity check against torch (tests/test_cnn_playback.py) and the cost benchmark
# (scripts/bench_cnn_playback.py):
#
#   godot3-server --path godot_project -s tests/cnn_parity.gd --cnn_policy=FILE --cnn_case=CASE.json
#       CASE.json: {"key": image key, "vectors": [T][V], "frames": [T] base64 of H*W*C bytes,
#                   "dones": [T] (true: the step starts an episode)}; one agent's sequence, as the
#       game gives it (get_obs() Dictionaries), the frame stack kept by the runner;
#       prints one line {"outputs": [T][n_out]} (9 digits)
#   ... --cnn_policy=FILE --cnn_bench_agents=A --cnn_bench_decisions=D
#       A agents decide D times on random frames; prints {"bench": {"ms_per_decision", "load_ms", ...}}
# A bad file or case prints "cnn_parity: error: ..." on stderr and exits 1.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")


func _initialize() -> void:
	var runner := PolicyRunner.new()
	var start := OS.get_ticks_usec()
	var error := runner.load_file(RlArgs.get_string("cnn_policy", ""))
	var load_ms := (OS.get_ticks_usec() - start) / 1000.0
	if error != "":
		_fail(error)
		return
	var agents := int(RlArgs.get_string("cnn_bench_agents", "0"))
	if agents > 0:
		_bench(runner, agents, int(RlArgs.get_string("cnn_bench_decisions", "10")), load_ms)
		quit(0)
		return
	var file := File.new()
	var case_path := RlArgs.get_string("cnn_case", "")
	if case_path == "" or file.open(case_path, File.READ) != OK:
		_fail("give --cnn_case=FILE.json (an existing file)")
		return
	var parsed := JSON.parse(file.get_as_text())
	file.close()
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
		_fail("%s is not a JSON object" % case_path)
		return
	_run(runner, parsed.result)
	quit(0)


func _run(runner, case: Dictionary) -> void:
	runner.set_agent_count(1)
	var lines := PoolStringArray()
	for t in range(case["frames"].size()):
		if case["dones"][t]:
			runner.reset(0)
		var obs := {"obs": case["vectors"][t], case["key"]: Marshalls.base64_to_raw(case["frames"][t])}
		var numbers := PoolStringArray()
		for value in runner.forward(obs, 0):
			numbers.append("%.9f" % value)
		lines.append("[%s]" % numbers.join(", "))
	print("{\"outputs\": [%s]}" % lines.join(", "))


# What a game pays per agent-decision: each agent's get_obs() Dictionary (a frame of random bytes
# and the vector values) through act(), as policy_mode.gd calls it.
func _bench(runner, agents: int, decisions: int, load_ms: float) -> void:
	var rng := RandomNumberGenerator.new()
	rng.seed = 1
	var cnn = runner.cnn
	var observations := []
	for _a in range(agents):
		var frame := PoolByteArray()
		for _i in range(cnn.height * cnn.width * cnn.channels):
			frame.append(rng.randi() % 256)
		var vector := []
		for _i in range(runner.observation_size):
			vector.append(rng.randf_range(-1, 1))
		observations.append({"obs": vector, cnn.image_key: frame})
	runner.set_agent_count(agents)
	var start := OS.get_ticks_usec()
	for _d in range(decisions):
		for a in range(agents):
			runner.act(observations[a], a)
	var ms := (OS.get_ticks_usec() - start) / 1000.0 / (decisions * agents)
	print(to_json({"bench": {"agents": agents, "decisions": decisions, "ms_per_decision": ms, "load_ms": load_ms,
			"image": [cnn.height, cnn.width, cnn.channels], "frame_stack": cnn.frame_stack,
			"features": cnn.features}}))


func _fail(message: String) -> void:
	printerr("cnn_parity: error: " + message)
	quit(1)
