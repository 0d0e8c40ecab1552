extends Reference
# The in-engine actors' policy (fragment_mode.gd): one policy file loaded and compiled as --policy playback
# loads it (policy_set.gd, policy_runner.gd), checked for what actors need, and per agent a generator of
# its own that samples as --policy_sample does (policy_sampling.gd). act() records each agent's action as
# the fragment holds it; set_weights() takes the trainer's binary weights message.

const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const PolicySampling = preload("res://addons/rl_sync/policy_sampling.gd")
const WeightsSetter = preload("res://addons/rl_sync/weights_setter.gd")

# The policy (policy_runner.gd) every agent plays.
var runner = null
# Per agent: observation values (D), action values (A: continuous values, then one per discrete key).
var obs_size := 0
var action_size := 0
# The float32 values of a weights message (W): the layers', the continuous keys' log-std, the normaliser's.
var weight_count := 0
# What act() recorded since they were last taken: each agent's action values, and its log-prob.
var actions := PoolRealArray()
var logprobs := PoolRealArray()

var _rngs := []
var _discrete_keys := []


# Loads the policy file for every agent of the sync node and seeds agent i's generator from
# hash([seed, --env_seed, i]); returns "" or the refusal (what is wrong and the fix).
func load_policy(sync_node: Node, path: String, seed_value: int) -> String:
	var agents: Array = sync_node.agents
	var specs := PolicySet.agent_specs(agents, sync_node.action_spaces, sync_node.get_parent())
	for spec in specs:
		if not spec["image"].empty():
			return ("%s observes a camera (\"%s\"): in-engine actors run vector observations only (a CNN in GDScript "
					+ "costs about 5 ms per decision); train with --no-in-engine") % [spec["label"], spec["image"]["key"]]
	var policies := PolicySet.new(sync_node.env_name, specs)
	policies.settable = true  # the networks get their weights setter (weights_setter.gd)
	var error := policies.load_files([path])
	if error != "":
		return error
	runner = policies.runner_of(0)
	for i in range(agents.size()):
		if policies.runner_of(i) != runner:
			return "policy file %s: in-engine actors run one policy for every agent; train with --no-in-engine" % path
	if runner.lstm != null:
		return runner.error_text("a recurrent policy (--lstm): in-engine actors run MLP policies; train with --no-in-engine")
	var missing := PolicySampling.without_log_std(runner.action_keys)
	if missing != "":
		return runner.error_text(("the continuous key \"%s\" has no \"log_std\" (format version 5), which sampling "
				+ "needs: re-export the policy with this godot-ppo (godot-ppo export-policy)") % missing)
	obs_size = runner.observation_size
	_discrete_keys = []
	action_size = 0
	for key in runner.action_keys:
		if key["action_type"] == "discrete":
			_discrete_keys.append(key["key"])
		else:
			action_size += int(key["size"])
	action_size += _discrete_keys.size()
	weight_count = WeightsSetter.count(runner)
	var env_seed := PolicySampling.env_seed()
	_rngs = []
	for i in range(agents.size()):
		var rng := RandomNumberGenerator.new()
		rng.seed = hash([seed_value, env_seed, i])
		_rngs.append(rng)
	return ""


# Agent i's action for its observation values `obs` (raw: normalised by the policy), sampled from its
# generator; its values go onto `actions` (continuous before clipping) and, with `logprob`, its
# log-probability onto `logprobs`. The Dictionary is the controller's (continuous values clipped).
func act(i: int, obs: Array, logprob: bool) -> Dictionary:
	var outputs: Array = runner.forward(obs, i)
	var unclipped := []
	var action := PolicySampling.sample(runner.action_keys, outputs, _rngs[i], unclipped)
	actions.append_array(PoolRealArray(unclipped))
	for key in _discrete_keys:
		actions.append(float(action[key]))
	if logprob:
		logprobs.append(PolicySampling.log_prob(runner.action_keys, outputs, action, unclipped))
	return action


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
	return WeightsSetter.apply(runner, bytes2var(body))
