extends Reference
# Our "drivers" message: who acts for which agents while a trainer trains (--self-play's
# --opponents). The trainer says {"type": "drivers", "agents": [i, ...], "driver": D, "path": FILE,
# "seed": S}: from now on the game itself acts for agents i (D "scripted": their controller's
# get_scripted_action(); "random": random actions; "policy": the policy file FILE, run in the
# engine as match_mode.gd runs one), or the trainer again (D "trainer"). The trainer still sends an
# action for every agent; the game overrides those of the agents it drives (act_for(), after each
# of the trainer's actions). The reply {"type": "drivers", "acted": N} counts the actions the game
# chose for its agents so far. python_trainer/envs/drivers.py declares the same words;
# tests/test_opponents.py holds the two equal. A driver is kept on the sync node (META).

const AgentDriver = preload("res://addons/rl_sync/agent_driver.gd")
const Contract = preload("res://addons/rl_sync/contract.gd")
const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")
const Result = preload("res://addons/rl_sync/result.gd")

const MESSAGE := Contract.MSG_DRIVERS
const AGENTS_KEY := "agents"
const DRIVER_KEY := "driver"
const PATH_KEY := "path"
const SEED_KEY := "seed"
const ACTED_KEY := "acted"
const TRAINER := "trainer"
const SCRIPTED := "scripted"
const RANDOM := "random"
const POLICY := "policy"
const DRIVERS := [TRAINER, SCRIPTED, RANDOM, POLICY]
# env_info's key (env_info_extras.gd adds it): per agent, whether its controller has get_scripted_action().
const SCRIPTED_KEY := Contract.SCRIPTED_KEY
const META := "rl_sync_drivers"

# Agent index -> its AgentDriver (the agents the game drives).
var driven := {}
var acted := 0


# Per agent, whether its controller has a scripted opponent (SCRIPTED_KEY).
static func scripted_agents(agents: Array) -> Array:
	var out := []
	for agent in agents:
		out.append(agent.has_method("get_scripted_action"))
	return out


# Applies `message` and replies on `stream`: a Result, GO_ON, or FAILED (said to the trainer first).
static func answer(sync_node: Node, stream: StreamPeerTCP, message: Dictionary) -> Reference:
	if not sync_node.has_meta(META):
		sync_node.set_meta(META, load("res://addons/rl_sync/driver_message.gd").new())
	var drivers = sync_node.get_meta(META)
	var error: String = drivers.apply(sync_node, message)
	var reply := {Contract.TYPE_KEY: MESSAGE, ACTED_KEY: drivers.acted} if error == "" \
			else {Contract.TYPE_KEY: Contract.MSG_ERROR, "message": error}
	if preload("res://addons/rl_sync/wire.gd").write_message(stream, to_json(reply)) != OK:
		return Result.disconnected()
	return Result.go_on() if error == "" else Result.failed(error)


func apply(sync_node: Node, message: Dictionary) -> String:
	var agents: Array = sync_node.agents
	var kind := str(message.get(DRIVER_KEY, ""))
	var ids = message.get(AGENTS_KEY, [])
	if not kind in DRIVERS or typeof(ids) != TYPE_ARRAY:
		return "drivers: give \"driver\" (one of %s) and \"agents\" (a list of agent indices), got %s" \
				% [str(DRIVERS), to_json(message)]
	var picked := []
	for i in ids:
		if typeof(i) != TYPE_REAL and typeof(i) != TYPE_INT or int(i) < 0 or int(i) >= agents.size():
			return "drivers: agent %s is not one of this game's %d agents" % [str(i), agents.size()]
		picked.append(agents[int(i)])
	if kind == TRAINER:
		for i in ids:
			driven.erase(int(i))
		return ""
	var driver := AgentDriver.new()
	var value := str(message.get(PATH_KEY, "")) if kind == POLICY else kind
	var specs := PolicySet.agent_specs(agents, sync_node.action_spaces, sync_node.get_parent()) if kind == POLICY else []
	var error := driver.setup("opponents", value, [RANDOM, SCRIPTED], sync_node.env_name, picked, specs,
			int(message.get(SEED_KEY, 0)))
	if error != "":
		return error
	for i in ids:
		driven[int(i)] = driver
	return ""


# The game's actions for the agents it drives, over the trainer's (called after each trainer action).
static func act_for(sync_node: Node) -> void:
	if not sync_node.has_meta(META):
		return
	var drivers = sync_node.get_meta(META)
	var agents: Array = sync_node.agents
	for i in drivers.driven:
		var driver: AgentDriver = drivers.driven[i]
		if agents[i].n_steps == 0:
			driver.reset(i)
		var obs = Observations.json(agents[i].get_obs())["obs"]
		agents[i].set_action(driver.act(agents[i], i, obs, sync_node.action_spaces[i]))
		drivers.acted += 1
