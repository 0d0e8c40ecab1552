extends Reference
# The in-engine actors' policies (fragment_mode.gd): one policy file, or one per policy name of a game of
# several policies, loaded and compiled as --policy playback loads them (policy_set.gd, policy_runner.gd),
# checked for what actors need, and per agent a generator of its own that samples from the agent's own
# policy as --policy_sample does (policy_sampling.gd). act() records each agent's action as the fragment
# holds it; set_weights() takes the trainer's binary weights message (the policies' values in turn).

const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const PolicySampling = preload("res://addons/rl_sync/policy_sampling.gd")
const WeightsSetter = preload("res://addons/rl_sync/weights_setter.gd")
const FragmentWire = preload("res://addons/rl_sync/fragment_wire.gd")

# The policies (policy_runner.gd) in the weights message's order, and the one each agent plays.
var runners := []
var runner_of := []
# Per agent: observation values (D), action values (A: continuous values, then one per discrete key).
var obs_sizes := []
var action_sizes := []
# The widest D and A (one policy: every agent's), and per policy name {weights, obs_size, action_size}.
var obs_size := 0
var action_size := 0
var sizes := {}
# The float32 values of a weights message (W): the layers', the continuous keys' log-std, the normaliser's.
var weight_count := 0
# What act() recorded since they were last taken: each agent's action values, and its log-prob.
var actions := PoolRealArray()
var logprobs := PoolRealArray()

var _rngs := []


# Loads the policy file for every agent of the sync node (`names` empty), or the files of the policies
# `names` (in that order; `paths` in the same order) each for its agents, and seeds agent i's generator
# from hash([seed, --env_seed, i]); `routes` (not empty): agent i plays the file paths[routes[i]], whatever its
# policy_name (self-play's two teams). Returns "" or the refusal (what is wrong and the fix).
func load_policy(sync_node: Node, paths: Array, names: Array, seed_value: int, routes := []) -> String:
	var agents: Array = sync_node.agents
	var specs := PolicySet.agent_specs(agents, sync_node.action_spaces, sync_node.get_parent())
	for spec in specs:
		if not spec["image"].empty():
			return ("%s observes a camera (\"%s\"): in-engine actors run vector observations only (a CNN in GDScript "
					+ "costs about 5 ms per decision); train with --no-in-engine") % [spec["label"], spec["image"]["key"]]
	var error := _by_route(sync_node.env_name, specs, paths, routes) if not routes.empty() \
			else _by_name(sync_node, specs, paths, names)
	if error != "":
		return error
	weight_count = 0
	for k in range(runners.size()):
		error = _check(runners[k])
		if error != "":
			return error
		var size := {FragmentWire.WEIGHTS_KEY: WeightsSetter.count(runners[k]),
				FragmentWire.OBS_SIZE_KEY: int(runners[k].observation_size),
				FragmentWire.ACTION_SIZE_KEY: _action_size(runners[k])}
		weight_count += size[FragmentWire.WEIGHTS_KEY]
		obs_size = int(max(obs_size, size[FragmentWire.OBS_SIZE_KEY]))
		action_size = int(max(action_size, size[FragmentWire.ACTION_SIZE_KEY]))
		if not names.empty():
			sizes[names[k]] = size
	obs_sizes = []
	action_sizes = []
	for i in range(agents.size()):
		obs_sizes.append(int(runner_of[i].observation_size))
		action_sizes.append(_action_size(runner_of[i]))
	var env_seed := PolicySampling.env_seed()
	_rngs = []
	for i in range(agents.size()):
		var rng := RandomNumberGenerator.new()
		rng.seed = hash([seed_value, env_seed, i])
		_rngs.append(rng)
	return ""


# Each agent plays the network of its policy_name: the files of `names` (in that order), or one file for every agent.
func _by_name(sync_node: Node, specs: Array, paths: Array, names: Array) -> String:
	var agents: Array = sync_node.agents
	var policies := PolicySet.new(sync_node.env_name, specs)
	policies.settable = true  # the networks get their weights setter (weights_setter.gd)
	var error := policies.load_files(paths)
	if error != "":
		return error
	runner_of = []
	runners = [policies.runner_of(0)] if names.empty() else []
	for name in names:
		var index: int = policies.policy_names().find(name)
		if index < 0:
			return "in-engine actors: no agent plays the policy \"%s\" (its agents play %s)" % [name,
					PoolStringArray(policies.policy_names()).join(", ")]
		runners.append(null)
	for i in range(agents.size()):
		runner_of.append(policies.runner_of(i))
		var k: int = 0 if names.empty() else names.find(policies.policy_of(i))
		if k < 0:
			return "%s plays the policy \"%s\", which the trainer did not send" % [specs[i]["label"], policies.policy_of(i)]
		if runners[k] == null:
			runners[k] = runner_of[i]
		if runner_of[i] != runners[k]:
			return "policy file %s: in-engine actors run one policy for every agent; train with --no-in-engine" % paths[0]
	return ""


# Agent i plays the file paths[routes[i]] whatever its policy_name (self-play: the learner's and the opponent's
# networks for the two teams of one policy); every file is loaded, played here or not (its weights arrive too).
func _by_route(game: String, specs: Array, paths: Array, routes: Array) -> String:
	if routes.size() != specs.size():
		return "\"%s\" gives %d agents' files, but this game has %d agents" % [FragmentWire.AGENT_POLICIES_KEY,
				routes.size(), specs.size()]
	runners = []
	for path in paths:
		var read = PolicySet.read_file(path, true)  # settable: weights_setter.gd's setter
		if read.is_failure():
			return read.message
		read = read.value
		if read.size() != 1:
			return "policy file %s: a bundle of policies, where \"%s\" takes one policy per file" % [path,
					FragmentWire.AGENT_POLICIES_KEY]
		read[0].set_agent_count(specs.size())
		runners.append(read[0])
	runner_of = []
	for i in range(specs.size()):
		var k = routes[i]
		if not typeof(k) in [TYPE_INT, TYPE_REAL] or k != floor(k) or k < 0 or k >= runners.size():
			return "\"%s\"[%d] is %s, not an index of the %d files" % [FragmentWire.AGENT_POLICIES_KEY, i, str(k),
					runners.size()]
		var error: String = runners[int(k)].check_agent(game, specs[i]["obs_size"], specs[i]["action_space"],
				specs[i].get("image", {}))
		if error != "":
			return "%s (%s)" % [error, specs[i]["label"]]
		runner_of.append(runners[int(k)])
	return ""


# Agent i's action for its observation values `obs` (raw: normalised by the policy), sampled from its
# generator; its values go onto `actions` (continuous before clipping) and, with `logprob`, its
# log-probability onto `logprobs`. The Dictionary is the controller's (continuous values clipped).
func act(i: int, obs: Array, logprob: bool) -> Dictionary:
	var runner = runner_of[i]
	var outputs: Array = runner.forward(obs, i)
	var unclipped := []
	var action := PolicySampling.sample(runner.action_keys, outputs, _rngs[i], unclipped)
	actions.append_array(PoolRealArray(unclipped))
	for key in runner.action_keys:
		if key["action_type"] == "discrete":
			actions.append(float(action[key["key"]]))
	if logprob:
		logprobs.append(PolicySampling.log_prob(runner.action_keys, outputs, action, unclipped))
	return action


# What in-engine actors refuse in a policy ("" for none).
static func _check(runner) -> String:
	if runner.lstm != null:
		return runner.error_text("a recurrent policy (--lstm): in-engine actors run MLP policies; train with --no-in-engine")
	var missing := PolicySampling.without_log_std(runner.action_keys)
	if missing != "":
		return runner.error_text(("the continuous key \"%s\" has no \"log_std\" (format version 5), which sampling "
				+ "needs: re-export the policy with this godot-ppo (godot-ppo export-policy)") % missing)
	return ""


# A policy's action values per agent: its continuous values, then one per discrete key.
static func _action_size(runner) -> int:
	var size := 0
	for key in runner.action_keys:
		size += int(key["size"]) if key["action_type"] != "discrete" else 1
	return size


# The trainer's weights message (var2bytes of a PoolRealArray of weight_count values, in the order
# weights_setter.gd gives): the network's members through its generated setter, then each continuous
# key's log-std, then the normaliser's means and variances. Returns "" or what is wrong.
func set_weights(body: PoolByteArray) -> String:
	var count := -1
	if body.size() >= 8 and body[0] == TYPE_REAL_ARRAY and body[1] == 0 and body[2] == 0 and body[3] == 0:
		count = body[4] | (body[5] << 8) | (body[6] << 16) | (body[7] << 24)
	if count != weight_count or body.size() != 8 + 4 * weight_count:
		return ("a weights message of %d bytes (%s); this policy takes %d float32 values (%d bytes: var2bytes of a "
				+ "PoolRealArray)") % [body.size(), "%d values" % count if count >= 0 else "not a float32 array",
				weight_count, 8 + 4 * weight_count]
	if runners.size() == 1:
		return WeightsSetter.apply(runners[0], bytes2var(body))
	var offset := 0
	for policy in runners:  # each policy's values, framed as one array of their own (no copy value by value)
		var n: int = WeightsSetter.count(policy)
		var part := PoolByteArray([TYPE_REAL_ARRAY, 0, 0, 0, n & 0xFF, (n >> 8) & 0xFF, (n >> 16) & 0xFF, (n >> 24) & 0xFF])
		part.append_array(body.subarray(8 + 4 * offset, 8 + 4 * (offset + n) - 1))
		var error: String = WeightsSetter.apply(policy, bytes2var(part))
		if error != "":
			return error
		offset += n
	return ""
