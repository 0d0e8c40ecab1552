extends Reference
# The networks that drive the agents with --policy=FILE[,FILE...]: each agent plays the network whose
# policy_name is the agent's policy_name; a file without a policy_name (versions 1 and 2, or a game
# trained with one policy) plays every agent that no named network claims. A bundle
# ({"policies": [...]}, the RUN_DIR/policy.json of a game of several policies) gives each of its
# entries as one named network.
#
# Everything is checked before the first step and reported in one line: an agent no network plays
# (naming the files, the policies they hold, and the fix), two networks of one name, a named network
# that no agent plays, a network that does not fit one of its agents. A recurrent network keeps one
# state per agent of the game; it steps only its own agents'.

const PolicyLimits = preload("res://addons/rl_sync/policy_limits.gd")
const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")
const ConvNetwork = preload("res://addons/rl_sync/conv_network.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# The files, as given.
var paths := []

# Per agent, what the checks need: {"label", "policy", "obs_size", "action_space", "image"} (agent_specs()).
var _agents := []
var _game := ""
# path -> the runners its text made (one, or a bundle's entries).
var _by_file := {}
# Per agent, the runner that plays it.
var _runner_of := []
# Set before loading: each network gets a setter of its weights (in-engine actors; weights_setter.gd).
var settable := false
# Whether the last load failed on an agent: no network fits it, or none plays its policy.
var agent_unplayed := false


# `specs`: agent_specs() of the game's agents.
func _init(game: String, specs: Array) -> void:
	_game = game
	_agents = specs


# What the checks need of each agent, asked once. `root` names agents in errors by their path from it.
static func agent_specs(agents: Array, action_spaces: Array, root: Node) -> Array:
	var specs := []
	for i in range(agents.size()):
		var obs = agents[i].get_obs()
		specs.append({
			"label": "agent %d (%s)" % [i, str(root.get_path_to(agents[i]))],
			"policy": str(agents[i].policy_name),
			"obs_size": ConvNetwork.vector_values(obs).size(),
			"action_space": action_spaces[i],
			"image": _image_of(agents[i], obs),
		})
	return specs


# An agent's camera as its get_obs_space() declares it: {"key", "size": [H, W, C]}, {} for none.
static func _image_of(agent, obs) -> Dictionary:
	if typeof(obs) != TYPE_DICTIONARY:
		return {}
	var space = agent.get_obs_space()
	for key in obs:
		if ConvNetwork.Contract.IMAGE_KEY_MARK in str(key):
			var spec = space.get(key) if typeof(space) == TYPE_DICTIONARY else null
			var size = spec.get("size") if typeof(spec) == TYPE_DICTIONARY else null
			return {"key": str(key), "size": size if typeof(size) == TYPE_ARRAY else ["?"]}
	return {}


# Loads the files and checks them against the agents; `texts`: path -> the text already read (the
# reloader compares later versions with it). Returns "" or what is wrong.
func load_files(file_paths: Array, texts: Dictionary = {}) -> String:
	paths = file_paths
	agent_unplayed = false
	var by_file := {}
	for path in paths:
		var read: Result = read_file(path, settable) if not texts.has(path) else read_runners(path, texts[path], settable)
		if read.is_failure():
			return read.message
		by_file[path] = read.value
	return _assign(by_file)


# A new version of one of the files (--policy_reload): it replaces that file's networks only if the
# whole set still fits the agents. Returns "" or what is wrong (then nothing changed).
func reload_text(path: String, text: String) -> String:
	var read: Result = read_runners(path, text, settable)
	if read.is_failure():
		return read.message
	var by_file := _by_file.duplicate()
	by_file[path] = read.value
	return _assign(by_file)


# The runners of one file: a Result, GO_ON with their Array, or FAILED saying what is wrong with it.
static func read_file(path: String, settable := false) -> Reference:
	var read: Result = PolicyLimits.read_text(path)  # a file over the engine's bounds is not read
	return read if read.is_failure() else read_runners(path, read.value, settable)


# The runners of a file's text, one for a single policy, one per entry for a bundle: a Result, GO_ON
# with their Array, or FAILED saying what is wrong (an entry's error names its policy).
static func read_runners(path: String, text: String, settable := false) -> Reference:
	var probe := PolicyRunner.new()
	probe.path = path
	probe.settable = settable
	var parsed: Result = probe.parse_text(text)
	if parsed.is_failure():
		return parsed
	var data = parsed.value
	if typeof(data) != TYPE_DICTIONARY or not data.has("policies"):
		var single_error := probe.load_dict(data)
		return Result.go_on([probe]) if single_error == "" else Result.failed(single_error)
	var error := probe.check_format(data)
	if error == "" and float(data["version"]) < PolicyRunner.Contract.POLICY_BUNDLE_VERSION:
		error = probe.error_text("a bundle of policies (\"policies\") needs version %d" % PolicyRunner.Contract.POLICY_BUNDLE_VERSION)
	var entries = data["policies"]
	if error == "" and (typeof(entries) != TYPE_ARRAY or entries.empty()):
		error = probe.error_text("\"policies\" must be a non-empty list of policies")
	if error != "":
		return Result.failed(error)
	var runners := []
	var names := {}
	for i in range(entries.size()):
		var name = entries[i].get("policy_name") if typeof(entries[i]) == TYPE_DICTIONARY else null
		if typeof(name) != TYPE_STRING or name.strip_edges() == "":
			error = "the bundle's entry %d has no \"policy_name\" (each entry names its policy)" % i
		elif names.has(name):
			error = "two entries of the bundle are named \"%s\"; each policy comes once" % name
		if error != "":
			return Result.failed(probe.error_text(error))
		names[name] = true
		var runner := PolicyRunner.new()
		runner.path = path
		runner.policy_name = name
		runner.settable = settable
		# An entry without a source of its own shows the bundle's (the reloader prints its global step).
		runner.source = data["source"] if typeof(data.get("source")) == TYPE_DICTIONARY else {}
		error = runner.load_dict(entries[i])
		if error != "":
			return Result.failed(error)
		runners.append(runner)
	return Result.go_on(runners)


# Routes each agent to its runner and checks the pair; only a set that fits replaces the current one.
func _assign(by_file: Dictionary) -> String:
	agent_unplayed = false
	var named := {}
	var nameless = null
	for path in paths:
		for runner in by_file[path]:
			if runner.policy_name == "" and nameless != null:
				return ("two policy files have no policy_name, %s and %s: only one may play every agent (give "
						+ "each policy's own file, RUN_DIR/policies/NAME.json)") % [nameless.path, runner.path]
			if named.has(runner.policy_name):
				return "two policy files give the policy \"%s\", %s and %s: give each policy once" % [
						runner.policy_name, named[runner.policy_name].path, runner.path]
			if runner.policy_name == "":
				nameless = runner
			else:
				named[runner.policy_name] = runner
	var runner_of := []
	var played := {}
	for spec in _agents:
		var runner = named.get(spec["policy"], nameless)
		var error: String = _missing(spec, by_file) if runner == null else runner.check_agent(_game, spec["obs_size"],
				spec["action_space"], spec.get("image", {}))
		if error != "":
			agent_unplayed = true
			return error if runner == null else "%s (%s plays the policy \"%s\")" % [error, spec["label"], spec["policy"]]
		played[runner.policy_name] = true
		runner_of.append(runner)
	for name in named:
		if not played.has(name):
			return "policy file %s gives the policy \"%s\", which no agent of \"%s\" plays (its agents play %s)" % [
					named[name].path, name, _game, PoolStringArray(policy_names()).join(", ")]
	_by_file = by_file
	_runner_of = runner_of
	set_agent_count(_agents.size())
	return ""


func _missing(spec: Dictionary, by_file: Dictionary) -> String:
	var held := PoolStringArray()
	for path in paths:
		var names := PoolStringArray()
		for runner in by_file[path]:
			names.append("\"%s\"" % runner.policy_name if runner.policy_name != "" else "no policy_name")
		held.append("%s gives %s" % [path, names.join(", ")])
	# A run of several policies writes each in RUN_DIR/policies/NAME.json: the missing one is likely
	# beside the last file given.
	var beside: String = paths[-1].get_base_dir().plus_file(spec["policy"] + ".json")
	return ("%s plays the policy \"%s\", but no policy file gives it (%s): add its file, e.g. --policy=%s,%s "
			+ "(a run of several policies writes RUN_DIR/policies/NAME.json)") % [spec["label"], spec["policy"],
			held.join("; "), PoolStringArray(paths).join(","), beside]


# The agents' policy names, each once, in the agents' order.
func policy_names() -> Array:
	var names := []
	for spec in _agents:
		if not spec["policy"] in names:
			names.append(spec["policy"])
	return names


func policy_of(agent: int) -> String:
	return _agents[agent]["policy"]


# The file's "source" (informational), the first network's for a bundle.
func source_of(path: String) -> Dictionary:
	return _by_file[path][0].source if _by_file.has(path) else {}


# The files' names, for the window's overlay.
func file_names() -> String:
	var names := PoolStringArray()
	for path in paths:
		names.append(path.get_file())
	return names.join(", ")


# One recurrent state per agent of the game in each recurrent network.
func set_agent_count(n: int) -> void:
	for path in _by_file:
		for runner in _by_file[path]:
			runner.set_agent_count(n)


# Forgets what agent `agent` saw: call it on the first observation of each of its episodes.
func reset(agent: int) -> void:
	_runner_of[agent].reset(agent)


# Whether agent `agent`'s network reads its camera: then act() takes the agent's get_obs() itself.
func sees(agent: int) -> bool:
	return _runner_of[agent].cnn != null


func act(obs, agent: int) -> Dictionary:
	return _runner_of[agent].act(obs, agent)


# The network (policy_runner.gd) that plays agent `agent`.
func runner_of(agent: int):
	return _runner_of[agent]
