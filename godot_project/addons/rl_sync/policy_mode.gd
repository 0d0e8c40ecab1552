extends Reference
# --policy: a trained network (a policy file, see policy_runner.gd) drives every agent, without a
# trainer. With --eval_episodes it plays that many episodes and prints {"eval": {...}}; with
# --policy_forward it prints the network's outputs for given observations (parity checks); with
# --policy_reload it picks up each new version of the file (`godot-ppo train --watch`).
# --policy=random: uniformly random actions (seeded by --env_seed) instead of a file, in any game: the
# baseline of an evaluation (--policy=random --eval_episodes=N).
#
# RLSync (sync.gd) holds one in policy mode. Nothing here quits: errors come back as a String and
# step() says when the evaluation is over, for RLSync to stop the run.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const PolicyReloader = preload("res://addons/rl_sync/policy_reloader.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")

# --policy=RANDOM: random actions instead of a policy file.
const RANDOM := "random"
# What start() returns once --policy_forward has printed the outputs: the run is over.
const PRINTED := "(printed the outputs)"

var runner: PolicyRunner = null
# With --policy_reload: watches the file and hands over each new version (null otherwise).
var reloader: PolicyReloader = null

# The RLSync node: its env_name and decision_step(). A Node, so holding it makes no reference cycle.
var _sync: Node
var _agents: Array
var _seed := 0
# --policy=random: the generator of its actions (null with a policy file).
var _random: RandomNumberGenerator = null
# Evaluation: each agent plays its share of the episodes, so short episodes are not favoured.
var _eval_quota := []
var _eval_returns := []
var _eval_lengths := []


# `seed_value` (--env_seed) goes into the evaluation report and seeds --policy=random.
func _init(sync_node: Node, seed_value: int) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_seed = seed_value


# Starts --policy=FILE from the command line: loads the file and, with --eval_episodes (N > 0),
# splits the episodes among the agents; or, with --policy_forward, prints the network's outputs and
# returns PRINTED. Returns "" to go on, PRINTED, or what is wrong.
func start(eval_episodes: int) -> String:
	# --policy_forward checks the network alone (any policy file), so it skips the agent check.
	var forward_only := RlArgs.has("policy_forward")
	var error := load_policy(RlArgs.get_string("policy", ""), not forward_only)
	if error == "" and forward_only:
		error = print_outputs(RlArgs.get_string("policy_forward", ""))
		return PRINTED if error == "" else error
	if error == "" and eval_episodes > 0:
		set_eval_episodes(eval_episodes)
	return error


# Returns "" or what is wrong with the file. `check_agents`: the file must fit the game's first
# agent (--policy_forward checks the network alone, so it skips this). With --policy_reload the file
# is then watched, and a new version replaces the policy (policy_reloader.gd).
func load_policy(file_path: String, check_agents: bool) -> String:
	if file_path == RANDOM:
		if not check_agents:
			return "--policy_forward needs a policy file; --policy=random has no network"
		_random = RandomNumberGenerator.new()
		_random.seed = _seed
		return ""
	runner = PolicyRunner.new()
	var reload := check_agents and RlArgs.has("policy_reload")
	# Reloading compares the file's text with what was loaded: read it once, for both.
	var text := PolicyReloader.read_text(file_path) if reload else ""
	var error := ""
	if text != "":
		runner.path = file_path
		error = runner.load_text(text)
	else:
		error = runner.load_file(file_path)
	if error == "" and check_agents:
		runner.set_agent_count(_agents.size())  # a recurrent policy: one memory per agent
		var obs_size: int = _agents[0].get_obs().size()
		error = runner.check_agent(_sync.env_name, obs_size, _sync.action_spaces[0])
		if error == "" and reload:
			reloader = PolicyReloader.new(file_path, _sync.env_name, obs_size, _sync.action_spaces[0], text)
	return error


# What drives the agents: "random", or the policy file's path.
func policy_name() -> String:
	return RANDOM if _random != null else runner.path


# Splits N evaluation episodes among the agents (0: play until stopped).
func set_eval_episodes(episodes: int) -> void:
	_eval_quota = []
	for i in range(_agents.size()):
		_eval_quota.append(episodes / _agents.size() + (1 if i < episodes % _agents.size() else 0))


# One decision step: every agent acts on its observation. Returns true once the evaluation's
# episodes are all played and the report is printed.
func step() -> bool:
	if reloader != null:
		var fresh = reloader.poll(OS.get_ticks_msec())
		if fresh != null:
			runner = fresh
			runner.set_agent_count(_agents.size())
	var results: Dictionary = _sync.decision_step()
	var evaluating := not _eval_quota.empty()
	for i in range(_agents.size()):
		if evaluating and results["done"][i] and _eval_quota[i] > 0:
			_eval_quota[i] -= 1
			_eval_returns.append(_agents[i].last_episode_return)
			_eval_lengths.append(_agents[i].last_episode_length)
		if _random != null:
			_sync.act(i, BenchmarkMode.sample_action(_sync.action_spaces[i], _random))
			continue
		if results["done"][i]:  # the observation starts a new episode: a recurrent policy forgets the last
			runner.reset(i)
		_sync.act(i, runner.act(results["obs"][i]["obs"], i))
	if not evaluating or _eval_quota.max() != 0:
		return false
	var total := 0.0
	for r in _eval_returns:
		total += r
	print(to_json({"eval": {
		"env": _sync.env_name,
		"policy": policy_name(),
		"seed": _seed,
		"episodes": _eval_returns.size(),
		"returns": _eval_returns,
		"lengths": _eval_lengths,
		"mean_return": total / _eval_returns.size(),
	}}))
	return true


# Parity check with the trainer: reads {"observations": [[...], ...]} and prints the raw network
# outputs and the chosen actions at full precision (to_json keeps only 6 digits). Returns "" or
# what is wrong with the input file. A recurrent policy sees the observations as one agent's
# sequence; an optional "dones": [...] (true: that observation starts a new episode) resets it.
func print_outputs(input_path: String) -> String:
	var file := File.new()
	if file.open(input_path, File.READ) != OK:
		return "--policy_forward: cannot read %s" % input_path
	var parsed := JSON.parse(file.get_as_text())
	file.close()
	if parsed.error != OK or typeof(parsed.result) != TYPE_DICTIONARY or not parsed.result.has("observations"):
		return "--policy_forward: %s must be JSON {\"observations\": [[...], ...]}" % input_path
	var lines := PoolStringArray()
	var dones = parsed.result.get("dones", [])
	runner.set_agent_count(1)
	for t in range(parsed.result["observations"].size()):
		var obs = parsed.result["observations"][t]
		if t < dones.size() and dones[t]:
			runner.reset(0)
		var outputs := runner.forward(obs, 0)
		var numbers := PoolStringArray()
		for value in outputs:
			numbers.append("%.9f" % value)
		lines.append("{\"outputs\": [%s], \"action\": %s}" % [numbers.join(", "), to_json(runner.outputs_to_action(outputs))])
	print("{\"forward\": [%s]}" % lines.join(", "))
	return ""
