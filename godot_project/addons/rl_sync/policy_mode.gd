extends Reference
# --policy=FILE[,FILE...]: trained networks (policy files, see policy_runner.gd) drive the agents,
# without a trainer; each agent plays the network of its policy_name (policy_set.gd: a file without
# one plays every agent, a bundle gives several). With --eval_episodes it plays that many episodes and
# prints {"eval": {...}} (returns, lengths, the mean of each numeric get_info() key, the --env_param
# values in force); with --policy_forward it prints one network's outputs for given observations
# (parity checks); with --policy_reload it picks up each new version of the files (`train --watch`).
# --policy=random: uniformly random actions (seeded by --env_seed) instead of a file, in any game: the
# baseline of an evaluation (--policy=random --eval_episodes=N).
# --policy_sample / --policy_noop_max: sampled actions, randomised starts (policy_sampling.gd).
# With --opponent=FILE|random|scripted|human, a game of two teams plays matches instead: the policy
# on one side, the opponent on the other (match_mode.gd).
#
# RLSync (sync.gd) holds one in policy mode. Nothing here quits: start() returns a Result (result.gd)
# and step() says when the evaluation is over, for RLSync to stop the run.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const PolicyReloader = preload("res://addons/rl_sync/policy_reloader.gd")
const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")
const MatchMode = preload("res://addons/rl_sync/match_mode.gd")
const PolicySampling = preload("res://addons/rl_sync/policy_sampling.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# --policy=RANDOM: random actions instead of a policy file.
const RANDOM := "random"

# The networks that play the agents (null with --policy=random or --policy_forward).
var policies: PolicySet = null
# --policy_forward: the one network it runs.
var runner: PolicyRunner = null
# With --policy_reload: one per file, each hands its new versions to `policies`.
var reloaders := []
# With --opponent: the matches, which then drive every agent.
var matches: MatchMode = null

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
# Which agent played each evaluated episode (the report's by_policy).
var _eval_agents := []
# Each numeric get_info() key of the evaluated episodes: [sum, count] (their means go in the report).
var _eval_info := {}
# --policy_noop_max: each episode's first decisions (null without it).
var _starts = null


# `seed_value` (--env_seed) goes into the evaluation report and seeds --policy=random.
func _init(sync_node: Node, seed_value: int) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_seed = seed_value
	_starts = PolicySampling.noop_starts(_agents.size())


# Starts --policy=FILE from the command line: loads the file and, with --eval_episodes (N > 0),
# splits the episodes among the agents; or, with --policy_forward, prints the network's outputs and
# is DONE. Returns a Result: GO_ON, DONE, or FAILED.
func start(eval_episodes: int) -> Reference:
	if RlArgs.has("opponent"):
		matches = MatchMode.new(_sync, _seed)
		var refused := matches.start(RlArgs.get_string("policy", ""), RlArgs.get_string("opponent", ""), eval_episodes)
		return Result.go_on() if refused == "" else Result.failed(refused)
	# --policy_forward checks the network alone (any policy file), so it skips the agent check.
	var forward_only := RlArgs.has("policy_forward")
	var error := load_policy(RlArgs.get_string("policy", ""), not forward_only)
	if error == "" and forward_only:
		error = print_outputs(RlArgs.get_string("policy_forward", ""))
		return Result.done() if error == "" else Result.failed(error)
	if error == "" and eval_episodes > 0:
		set_eval_episodes(eval_episodes)
	return Result.go_on() if error == "" else Result.failed(error)


# Returns "" or what is wrong with the files (`policy_arg`: --policy's value, files separated by
# commas). `check_agents`: every agent must have a network that fits it (--policy_forward runs one
# network alone, so it skips this). With --policy_reload each file is then watched, and a new
# version replaces its networks (policy_reloader.gd).
func load_policy(policy_arg: String, check_agents: bool) -> String:
	if policy_arg == RANDOM:
		if not check_agents:
			return "--policy_forward needs a policy file; --policy=random has no network"
		_random = RandomNumberGenerator.new()
		_random.seed = _seed
		return ""
	if policy_arg == "scripted":
		return "--policy=scripted plays a game's scripted opponent in matches: add --opponent=FILE, random or scripted"
	var paths := []
	for path in policy_arg.split(",", false):
		if path.strip_edges() != "":
			paths.append(path.strip_edges())
	if paths.empty():
		return "--policy=%s names no file: give --policy=FILE[,FILE...] or --policy=random" % policy_arg
	if not check_agents:
		if paths.size() != 1:
			return "--policy_forward runs one network: give one policy file, not %d" % paths.size()
		runner = PolicyRunner.new()
		return runner.load_file(paths[0])
	var reload := RlArgs.has("policy_reload")
	# Reloading compares each file's text with what was loaded: read it once, for both.
	var texts := {}
	for path in paths:
		var text := PolicyReloader.read_text(path) if reload else ""
		if text != "":
			texts[path] = text
	policies = PolicySet.new(_sync.env_name, PolicySet.agent_specs(_agents, _sync.action_spaces, _sync.get_parent()))
	var error := policies.load_files(paths, texts)
	if error == "" and reload:
		for path in paths:
			reloaders.append(PolicyReloader.new(path, policies, texts.get(path, "")))
	return error


# What drives the agents: "random", or --policy's files (separated by commas).
func policy_arg() -> String:
	return RANDOM if _random != null else PoolStringArray(policies.paths).join(",")


# The overlay's words for it: "random", or the files' names.
func file_names() -> String:
	if matches != null:
		return matches.label()
	return RANDOM if _random != null else policies.file_names()


# Splits N evaluation episodes among the agents (0: play until stopped).
func set_eval_episodes(episodes: int) -> void:
	_eval_quota = []
	for i in range(_agents.size()):
		_eval_quota.append(episodes / _agents.size() + (1 if i < episodes % _agents.size() else 0))


# One decision step: every agent acts on its observation. Returns true once the evaluation's
# episodes are all played and the report is printed.
func step() -> bool:
	if matches != null:
		return matches.step()
	for reloader in reloaders:
		reloader.poll(OS.get_ticks_msec())
	var results: Dictionary = _sync.decision_step()
	var evaluating := not _eval_quota.empty()
	for i in range(_agents.size()):
		if evaluating and results["done"][i] and _eval_quota[i] > 0:
			_eval_quota[i] -= 1
			_eval_returns.append(_agents[i].last_episode_return)
			_eval_lengths.append(_agents[i].last_episode_length)
			_eval_agents.append(i)
			_add_info(results["info"][i])
		if _random != null:
			_sync.act(i, BenchmarkMode.sample_action(_sync.action_spaces[i], _random))
			continue
		if results["done"][i]:  # the observation starts a new episode: a recurrent policy forgets the last
			policies.reset(i)
		var noop = _starts.action(i, results["done"][i], _agents[i], _sync.action_spaces[i]) if _starts != null else null
		if noop != null:
			_sync.act(i, noop)
			continue
		# a camera policy reads the frame's bytes as the agent gives them (the step's are hex)
		_sync.act(i, policies.act(_agents[i].get_obs() if policies.sees(i) else results["obs"][i]["obs"], i))
	if not evaluating or _eval_quota.max() != 0:
		return false
	var report := {
		"env": _sync.env_name,
		"policy": policy_arg(),
		"seed": _seed,
		"episodes": _eval_returns.size(),
		"returns": _eval_returns,
		"lengths": _eval_lengths,
		"mean_return": _mean(_eval_returns),
		"info_means": _info_means(),
		"env_params": _sync.env_params.settings(0),
	}
	# Several policies: the sides' returns apart as well (a chaser's +1 is a runner's -1).
	if _random == null and policies.policy_names().size() > 1:
		report["by_policy"] = _by_policy()
	print(to_json({RlArgs.Contract.EVAL_REPORT: report}))
	return true


func _by_policy() -> Dictionary:
	var sides := {}
	for k in range(_eval_returns.size()):
		var name: String = policies.policy_of(_eval_agents[k])
		if not sides.has(name):
			sides[name] = {"returns": [], "lengths": []}
		sides[name]["returns"].append(_eval_returns[k])
		sides[name]["lengths"].append(_eval_lengths[k])
	for name in sides:
		sides[name]["episodes"] = sides[name]["returns"].size()
		sides[name]["mean_return"] = _mean(sides[name]["returns"])
	return sides


static func _mean(values: Array) -> float:
	var total := 0.0
	for v in values:
		total += v
	return total / max(values.size(), 1)


# An ended episode's get_info() (the sync node's own keys are not numbers, and are skipped).
func _add_info(info: Dictionary) -> void:
	for key in info:
		if typeof(info[key]) in [TYPE_INT, TYPE_REAL]:
			var sums: Array = _eval_info.get(key, [0.0, 0])
			_eval_info[key] = [sums[0] + info[key], sums[1] + 1]


# The mean of each numeric get_info() key over the episodes that reported it, e.g. a success rate.
func _info_means() -> Dictionary:
	var means := {}
	for key in _eval_info:
		means[key] = _eval_info[key][0] / _eval_info[key][1]
	return means


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
