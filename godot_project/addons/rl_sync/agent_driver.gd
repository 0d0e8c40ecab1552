extends Reference
# What chooses the actions of one side of a match (match_mode.gd): a policy set (policy files,
# policy_set.gd routes each agent to the network of its policy_name), random actions, the
# controllers' scripted opponent (their optional get_scripted_action()), or the keyboard (their
# get_heuristic_action(), in a window). A driver may act for any agent of the game: the sides swap
# between matches, so whatever drives one team must fit the agents of both.

const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

const NETWORK := "network"
const RANDOM := "random"
const SCRIPTED := "scripted"
const HUMAN := "human"

# NETWORK, RANDOM, SCRIPTED or HUMAN.
var kind := ""
# The value it was made from, as given (a file, files separated by commas, or a keyword).
var text := ""
# NETWORK: the networks, one per policy name.
var policies: PolicySet = null
var _rng: RandomNumberGenerator = null


# Makes the driver of `flag`'s value (`flag`: "policy" or "opponent"; `keywords`: the words it
# takes besides files). `specs`: PolicySet.agent_specs() of the game's agents. Returns "" or what
# is wrong, in one line that names the flag and the fix.
func setup(flag: String, value: String, keywords: Array, env: String, agents: Array, specs: Array,
		seed_value: int) -> String:
	text = value
	if value in keywords:
		kind = value
		if kind == RANDOM:
			_rng = RandomNumberGenerator.new()
			_rng.seed = seed_value
		elif kind == SCRIPTED:
			for agent in agents:
				if not agent.has_method("get_scripted_action"):
					return ("--%s=scripted: %s's agents have no scripted opponent (%s defines no get_scripted_action(), "
							+ "agent_controller.gd's optional hook): implement it, or give --%s=random or a policy file") \
							% [flag, env, agent.get_script().resource_path.get_file(), flag]
		elif kind == HUMAN and RlArgs.is_headless():
			return ("--%s=human plays with the keyboard in a window: run the windowed export "
					+ "(exports/windowed/rl_games.x86_64), or give --%s=random, scripted or a policy file") % [flag, flag]
		return ""
	var paths := []
	for path in value.split(",", false):
		if path.strip_edges() != "":
			paths.append(path.strip_edges())
	var words := PoolStringArray(keywords).join(", ")
	if paths.empty():
		return "--%s=%s names nothing: give a policy file or one of %s" % [flag, value, words]
	for path in paths:
		if not File.new().file_exists(path) and not path.ends_with(".json"):
			return "--%s=%s is neither a policy file nor one of %s: give an existing policy file (.json) or one of them" \
					% [flag, path, words]
	kind = NETWORK
	policies = PolicySet.new(env, specs)
	var error := policies.load_files(paths)
	if error != "" and policies.agent_unplayed:  # a network that does not fit an agent, or none for it
		error += ("; the sides swap between matches, so --%s plays the agents of both teams: give a policy file of "
				+ "%s's agents (RUN_DIR/policy.json of a `godot-ppo train --env-id %s` run)") % [flag, env, env]
	return "--%s: %s" % [flag, error] if error != "" else ""


# Forgets what agent `agent` saw (a recurrent network): call it where the agent's episode begins.
func reset(agent: int) -> void:
	if policies != null:
		policies.reset(agent)


# The action of agent `i` (its controller `agent`, its observation `obs`, its action space `space`).
func act(agent: Node, i: int, obs: Array, space: Dictionary) -> Dictionary:
	match kind:
		NETWORK:
			return policies.act(obs, i)
		RANDOM:
			return BenchmarkMode.sample_action(space, _rng)
		SCRIPTED:
			return agent.get_scripted_action()
	return agent.get_heuristic_action()


# The overlay's words for it: the files' names, or the keyword.
func label() -> String:
	return policies.file_names() if kind == NETWORK else kind
