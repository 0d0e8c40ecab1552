extends SceneTree
# Runs addons/rl_sync/lstm_cell.gd outside any game, for the pytest parity check against torch.nn.LSTM
# (tests/test_lstm_cell.py) and the per-frame cost benchmark (scripts/bench_lstm_cell.py):
#
#   godot3-server --path godot_project -s tests/lstm_parity.gd --lstm_case=CASE.json
#       CASE.json: {"weights": {...}, "agents": N, "inputs": [T][N][I], "resets": [T][N] (true: reset first)}
#       prints one line {"outputs": [T][N][H]}
#   ... --lstm_case=CASE.json --lstm_bench_frames=F
#       steps every agent once per frame for F frames, prints {"bench": {"agents", "frames", "ms_per_frame"}}
# A bad case prints "lstm_parity: error: ..." on stderr and exits 1.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const LstmCell = preload("res://addons/rl_sync/lstm_cell.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")


func _initialize() -> void:
	var case_path := RlArgs.get_string("lstm_case", "")
	var file := File.new()
	if case_path == "" or file.open(case_path, File.READ) != OK:
		_fail("give --lstm_case=FILE.json (an existing file)")
		return
	var parsed := JSON.parse(file.get_as_text())
	file.close()
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY:
		_fail("%s is not a JSON object" % case_path)
		return
	var case: Dictionary = parsed.result
	var cell := LstmCell.new()
	var error := cell.load_weights(case["weights"])
	if error != "":
		_fail(error)
		return
	cell.set_agent_count(int(case["agents"]))
	var frames := int(RlArgs.get_string("lstm_bench_frames", "0"))
	if frames > 0:
		_bench(cell, case["inputs"][0], frames)
	else:
		_run(cell, case["inputs"], case["resets"])
	quit(0)


func _run(cell, inputs: Array, resets: Array) -> void:
	var outputs := []
	for t in range(inputs.size()):
		var row := []
		for agent in range(cell.agent_count()):
			if resets[t][agent]:
				cell.reset(agent)
			row.append(cell.step(agent, inputs[t][agent]))
		outputs.append(row)
	print(to_json({"outputs": outputs}))


# What a game pays per frame: every agent steps once, its input already in chunks (as policy_network.gd's
# encoder leaves it), so only the cell itself is timed.
func _bench(cell, first_inputs: Array, frames: int) -> void:
	var chunks := []
	for agent in range(cell.agent_count()):
		chunks.append(BlockCompiler.to_chunks(first_inputs[agent]))
	var start := OS.get_ticks_usec()
	for _f in range(frames):
		for agent in range(cell.agent_count()):
			cell.step_chunks(agent, chunks[agent])
	var ms := (OS.get_ticks_usec() - start) / 1000.0 / frames
	print(to_json({"bench": {"agents": cell.agent_count(), "frames": frames, "ms_per_frame": ms,
			"input_size": cell.input_size, "hidden_size": cell.hidden_size}}))


func _fail(message: String) -> void:
	printerr("lstm_parity: error: " + message)
	quit(1)
