extends Reference
# Evaluation that is not the argmax, for deterministic games:
# --policy_sample: a policy's actions drawn from its distributions, as the trainer draws them: a
# softmax over each discrete key's logits, Normal(mean, exp(log_std)) for each continuous value
# (the file's "log_std" of that key, version 5), clipped to [-1, 1] as the trainer clips what it
# sends. Each runner draws from a generator of its own, seeded by --env_seed.
# --policy_noop_max=K: each agent's episodes start with a number of decisions drawn in [0, K] from a
# generator seeded by --env_seed, played with the controller's get_noop_action() (random actions
# when it has none), before the policy takes over (NoopStarts).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const BenchmarkMode = preload("res://addons/rl_sync/benchmark_mode.gd")

const SAMPLE_FLAG := "policy_sample"
const NOOP_FLAG := "policy_noop_max"


static func env_seed() -> int:
	return int(RlArgs.get_string("env_seed", "0"))


# With --policy_sample: a new generator for one runner; else null (the file's rule plays).
static func sampler():
	if not RlArgs.has(SAMPLE_FLAG):
		return null
	var rng := RandomNumberGenerator.new()
	rng.seed = env_seed()
	return rng


# "" when --policy_sample can play the keys, else what is missing: each continuous key's log-std.
static func missing(action_keys: Array) -> String:
	if not RlArgs.has(SAMPLE_FLAG):
		return ""
	var key := without_log_std(action_keys)
	if key != "":
		return ("--policy_sample needs the log-std of the continuous key \"%s\" (\"log_std\", a version 5 file): "
				+ "export the policy again with this godot-ppo") % key
	return ""


# The first continuous key without its log-std (one value per action value), or "".
static func without_log_std(action_keys: Array) -> String:
	for key in action_keys:
		var log_std = key.get("log_std")
		if key["action_type"] == "continuous" and (typeof(log_std) != TYPE_ARRAY or log_std.size() != int(key["size"])):
			return str(key["key"])
	return ""


# One action drawn from the distributions the outputs (logits, means) describe. `unclipped` (an Array, or
# null) gets each continuous value as drawn, before clipping (the in-engine actors record them).
static func sample(action_keys: Array, outputs: Array, rng: RandomNumberGenerator, unclipped = null) -> Dictionary:
	var action := {}
	var offset := 0
	for key in action_keys:
		var size := int(key["size"])
		if key["action_type"] == "discrete":
			action[key["key"]] = _categorical(outputs, offset, size, rng)
		else:
			var values := []
			for i in range(size):
				var value: float = outputs[offset + i] + exp(float(key["log_std"][i])) * rng.randfn(0.0, 1.0)
				if unclipped != null:
					unclipped.append(value)
				values.append(clamp(value, -1.0, 1.0))
			action[key["key"]] = values
		offset += size
	return action


# The log-probability of an action as torch's distributions give it: per discrete key its index's
# log-softmax, per continuous value the Normal(mean, exp(log_std)) log-density of its unclipped value
# (`unclipped`, in the keys' order), summed.
static func log_prob(action_keys: Array, outputs: Array, action: Dictionary, unclipped: Array) -> float:
	var total := 0.0
	var offset := 0
	var c := 0
	for key in action_keys:
		var size := int(key["size"])
		if key["action_type"] == "discrete":
			var top: float = outputs[offset]
			for i in range(1, size):
				top = max(top, outputs[offset + i])
			var sum := 0.0
			for i in range(size):
				sum += exp(outputs[offset + i] - top)
			total += outputs[offset + int(action[key["key"]])] - top - log(sum)
		else:
			for i in range(size):
				var log_std := float(key["log_std"][i])
				var z: float = (unclipped[c] - outputs[offset + i]) / exp(log_std)
				total += -0.5 * z * z - log_std - 0.5 * log(2.0 * PI)
				c += 1
		offset += size
	return total


# An index drawn with probabilities softmax(outputs[offset : offset + size]).
static func _categorical(outputs: Array, offset: int, size: int, rng: RandomNumberGenerator) -> int:
	var top: float = outputs[offset]
	for i in range(1, size):
		top = max(top, outputs[offset + i])
	var weights := []
	var total := 0.0
	for i in range(size):
		weights.append(exp(outputs[offset + i] - top))
		total += weights[i]
	var u := rng.randf() * total
	for i in range(size):
		u -= weights[i]
		if u < 0.0:
			return i
	return size - 1


# With --policy_noop_max=K: a NoopStarts; else null.
static func noop_starts(agent_count: int):
	if not RlArgs.has(NOOP_FLAG):
		return null
	return NoopStarts.new(agent_count, max(0, int(RlArgs.get_string(NOOP_FLAG, "0"))), env_seed())


class NoopStarts:
	extends Reference
	var _most := 0
	var _rng := RandomNumberGenerator.new()
	# Per agent, the no-op decisions left in its episode (-1: not drawn yet).
	var _left := []

	func _init(agent_count: int, most: int, seed_value: int) -> void:
		_most = most
		_rng.seed = seed_value
		for _i in range(agent_count):
			_left.append(-1)

	# The action of agent `i` while its episode's no-ops last, else null (the policy plays).
	# `done`: the agent's observation starts a new episode.
	func action(i: int, done: bool, agent: Node, space: Dictionary):
		if done or _left[i] < 0:
			_left[i] = _rng.randi_range(0, _most)
		if _left[i] == 0:
			return null
		_left[i] -= 1
		if agent.has_method("get_noop_action"):
			return agent.get_noop_action()
		return BenchmarkMode.sample_action(space, _rng)
