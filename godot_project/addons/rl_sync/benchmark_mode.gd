extends Reference
# --benchmark_steps=N: random actions chosen inside the engine for N decision steps, then one line
# {"benchmark": {...}} with the rate. No trainer and no JSON per step, so the rate is the limit a
# synced run can approach (scripts/bench_sync.py compares the two).
#
# RLSync (sync.gd) holds one in benchmark mode; step() says when the run is over, for RLSync to stop.

const Contract = preload("res://addons/rl_sync/contract.gd")
# The RLSync node: its env_name and decision_step(). A Node, so holding it makes no reference cycle.
var _sync: Node
var _agents: Array
var _action_spaces: Array
var _steps := 0
var _done_steps := 0
var _start_usec := 0
# Seeded by --env_seed, so a benchmark's actions are the same from run to run.
var _rng := RandomNumberGenerator.new()


func _init(sync_node: Node, steps: int, seed_value: int) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_action_spaces = sync_node.action_spaces
	_steps = steps
	_rng.seed = seed_value


# One decision step with random actions. Returns true once the N steps are done and the report is
# printed.
func step() -> bool:
	# The clock starts at the first decision step, after the scene's start-up.
	if _done_steps == 0:
		_start_usec = OS.get_ticks_usec()
	_sync.decision_step()
	for i in range(_agents.size()):
		_agents[i].set_action(random_action(_action_spaces[i]))
	_done_steps += 1
	if _done_steps < _steps:
		return false
	var seconds := (OS.get_ticks_usec() - _start_usec) / 1e6
	print(to_json({Contract.BENCHMARK_REPORT: {
		"env": _sync.env_name,
		"agents": _agents.size(),
		"decision_steps": _done_steps,
		"decision_frames": _sync.action_repeat,  # physics frames per decision (env_info's decision_frames)
		"seconds": seconds,
		"agent_steps_per_second": _done_steps * _agents.size() / max(seconds, 1e-9),
	}}))
	return true


func random_action(space: Dictionary) -> Dictionary:
	return sample_action(space, _rng)


# A uniformly random action of a godot-rl action space (also --policy=random's, in policy_mode.gd).
static func sample_action(space: Dictionary, _rng: RandomNumberGenerator) -> Dictionary:
	var action := {}
	for key in space:
		var size := int(space[key]["size"])
		if space[key]["action_type"] == "discrete":
			action[key] = _rng.randi_range(0, size - 1)
		else:
			var values := []
			for _i in range(size):
				values.append(_rng.randf_range(-1.0, 1.0))
			action[key] = values
	return action
