extends "res://tests/test_case.gd"
# A sync node with fake agents and no scene tree or trainer, for the tests of the decision step and the
# session's message handling (test_sync.gd, test_binary_exchange.gd).

const Sync = preload("res://addons/rl_sync/sync.gd")
const TrainerSession = preload("res://addons/rl_sync/trainer_session.gd")
const JsonActions = preload("res://addons/rl_sync/json_actions.gd")
const PackedActions = preload("res://addons/rl_sync/packed_actions.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")
const FakeAgent = preload("res://tests/fake_agent.gd")

var sync
var agents := []


func _setup(n_agents: int, max_steps: int) -> void:
	sync = Sync.new()
	agents = []
	for _i in range(n_agents):
		var agent = FakeAgent.new()
		agent.max_episode_steps = max_steps
		agent.begin_episode()
		agents.append(agent)
	sync.agents = agents
	for agent in agents:
		sync.action_spaces.append(agent.get_action_space())


func cleanup() -> void:
	for agent in agents:
		agent.free()
	if sync != null:
		sync.free()
