extends Reference
# Our extension of env_info, beside trainer_session.gd's keys: where each agent plays and how often
# it decides, for `godot-ppo envs` (the keys are the contract's: python_trainer/base/contract.py). A game made with godot_rl_agents' plugin sends none.

const Contract = preload("res://addons/rl_sync/contract.gd")
const DriverMessage = preload("res://addons/rl_sync/driver_message.gd")
const FragmentWire = preload("res://addons/rl_sync/fragment_wire.gd")

# Each agent's arena: agents with one parent node (a pong court) share one, numbered in the order
# the agents first appear (match_mode.gd plays a match in each).
const ARENAS_KEY := Contract.ARENAS_KEY
# Physics frames per decision: the sync node's frames_per_decision times --action_repeat.
const DECISION_FRAMES_KEY := Contract.DECISION_FRAMES_KEY
# Physics frames per second of game time (Engine.iterations_per_second).
const PHYSICS_FPS_KEY := Contract.PHYSICS_FPS_KEY


# `info` with the keys added, from the sync node `sync_node` (its agents and action_repeat).
static func add_to(sync_node: Node, info: Dictionary) -> Dictionary:
	info[ARENAS_KEY] = arena_indices(sync_node.agents)
	info[DECISION_FRAMES_KEY] = int(sync_node.action_repeat)
	info[PHYSICS_FPS_KEY] = Engine.iterations_per_second
	info[DriverMessage.SCRIPTED_KEY] = DriverMessage.scripted_agents(sync_node.agents)  # for --opponents scripted
	info[FragmentWire.ACTORS] = FragmentWire.ACTORS_VERSION  # its in-engine actors (fragment_mode.gd): --in-engine
	return info


# Each agent's arena index (see ARENAS_KEY).
static func arena_indices(agents: Array) -> Array:
	var parents := []
	var out := []
	for agent in agents:
		var k := parents.find(agent.get_parent())
		if k == -1:
			k = parents.size()
			parents.append(agent.get_parent())
		out.append(k)
	return out
