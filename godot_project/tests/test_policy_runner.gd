extends "res://tests/test_case.gd"
# The in-engine policy runner: the blocked forward pass against a plain scalar one, and bad files.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")


func _random_matrix(rng: RandomNumberGenerator, rows: int, columns: int) -> Array:
	var m := []
	for _r in range(rows):
		var row := []
		for _c in range(columns):
			row.append(rng.randf_range(-1, 1))
		m.append(row)
	return m


func _policy(n_obs: int, hidden: int, n_out: int, rule: String, keys: Array) -> Dictionary:
	var rng := RandomNumberGenerator.new()
	rng.seed = 42
	var sizes := [n_obs, hidden, hidden, n_out]
	var layers := []
	for l in range(3):
		layers.append({
			"weight": _random_matrix(rng, sizes[l + 1], sizes[l]),
			"bias": _random_matrix(rng, 1, sizes[l + 1])[0],
			"activation": "tanh" if l < 2 else "linear",
		})
	var mean := []
	var variance := []
	for _i in range(n_obs):
		mean.append(rng.randf_range(-0.5, 0.5))
		variance.append(rng.randf_range(0.1, 2.0))
	return {
		"format": "godot-ppo-policy", "version": 1, "env": "ball_chase", "observation_size": n_obs,
		"action_keys": keys, "action_rule": rule, "layers": layers,
		"obs_normalization": {"mean": mean, "var": variance, "epsilon": 1e-8, "clip": 10.0},
	}


# The obvious scalar forward pass, as the reference.
func _reference(policy: Dictionary, obs: Array) -> Array:
	var norm: Dictionary = policy["obs_normalization"]
	var x := []
	for i in range(obs.size()):
		x.append(clamp((obs[i] - norm["mean"][i]) / sqrt(norm["var"][i] + 1e-8), -10, 10))
	for layer in policy["layers"]:
		var y := []
		for j in range(layer["weight"].size()):
			var s: float = layer["bias"][j]
			for i in range(x.size()):
				s += layer["weight"][j][i] * x[i]
			y.append(tanh(s) if layer["activation"] == "tanh" else s)
		x = y
	return x


func test_forward_matches_the_scalar_reference() -> void:
	# Sizes that are not multiples of 3 exercise the padding of the blocks.
	var policy := _policy(13, 64, 2, "clipped_mean", [{"key": "move", "action_type": "continuous", "size": 2}])
	var runner := PolicyRunner.new()
	check_eq(runner.load_dict(policy), "", "load error")
	var rng := RandomNumberGenerator.new()
	for _k in range(20):
		var obs := []
		for _i in range(13):
			obs.append(rng.randf_range(-1, 1))
		var got := runner.forward(obs)
		var expected := _reference(policy, obs)
		for j in range(2):
			check_near(got[j], expected[j], 1e-4, "output %d" % j)


func test_actions_follow_the_rule() -> void:
	var runner := PolicyRunner.new()
	runner.load_dict(_policy(4, 8, 5, "argmax", [
			{"key": "turn", "action_type": "discrete", "size": 3},
			{"key": "fire", "action_type": "discrete", "size": 2}]))
	check_eq(runner.outputs_to_action([0.1, 0.9, -1.0, 2.0, 1.0]), {"turn": 1, "fire": 0}, "argmax per key")
	runner = PolicyRunner.new()
	runner.load_dict(_policy(4, 8, 2, "clipped_mean", [{"key": "move", "action_type": "continuous", "size": 2}]))
	check_eq(runner.outputs_to_action([1.7, -0.25]), {"move": [1.0, -0.25]}, "clipped mean")


func test_bad_policies_are_explained() -> void:
	var keys := [{"key": "move", "action_type": "continuous", "size": 2}]
	var cases := []
	var p := _policy(12, 8, 2, "clipped_mean", keys)
	p["version"] = 7
	cases.append([p, "unknown policy file version 7"])
	p = _policy(12, 8, 2, "clipped_mean", keys)
	p["layers"][1]["weight"].pop_back()
	cases.append([p, "layer 1 has 7 weight rows but 8 biases"])
	p = _policy(12, 8, 2, "clipped_mean", keys)
	p["layers"][1]["weight"][0].pop_back()
	cases.append([p, "layer 1 expects 8 inputs"])
	p = _policy(12, 8, 2, "clipped_mean", keys)
	p["layers"][2]["bias"][0] = NAN
	cases.append([p, "not a finite number"])
	p = _policy(12, 8, 3, "clipped_mean", keys)
	cases.append([p, "the network has 3 outputs but action_keys need 2"])
	p = _policy(12, 8, 2, "clipped_mean", keys)
	p.erase("layers")
	cases.append([p, "the key \"layers\" is missing"])
	cases.append([{"format": "something else"}, "not a godot-ppo policy file"])
	p = _policy(12, 8, 2, "clipped_mean", [{"key": "move", "action_type": "sideways", "size": 2}])
	cases.append([p, "every action key needs"])
	p = _policy(12, 8, 2, "mean_of_means", keys)
	cases.append([p, "unknown action_rule \"mean_of_means\""])
	for case in cases:
		var error := PolicyRunner.new().load_dict(case[0])
		check(case[1] in error, "expected an error containing '%s', got '%s'" % [case[1], error])


# A recurrent policy for 4 observations and one continuous key of 2: an encoder layer to 3 values, an
# LSTM of hidden size 2, a head layer; the caller then makes one of its sizes lie.
static func lstm_policy() -> Dictionary:
	var rows := []
	for _r in range(8):
		rows.append([0.1, 0.1, 0.1])
	var square := []
	for _r in range(8):
		square.append([0.1, 0.1])
	return {
		"format": "godot-ppo-policy", "version": 1, "env": "ball_chase", "observation_size": 4,
		"action_keys": [{"key": "move", "action_type": "continuous", "size": 2}],
		"action_rule": "clipped_mean", "obs_normalization": null,
		"layers": [{"weight": [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], "bias": [0, 0, 0], "activation": "tanh"},
				{"weight": [[1, 0], [0, 1]], "bias": [0, 0], "activation": "linear"}],
		"lstm": {"after_layer": 1, "input_size": 3, "hidden_size": 2, "weight_ih": rows, "weight_hh": square,
				"bias": [0, 0, 0, 0, 0, 0, 0, 0]},
	}


# Every size is checked against a maximum and the arrays it describes before anything is allocated
# from it: a file claiming a huge LSTM (4 x hidden_size biases were allocated first) is refused at once.
func test_huge_declared_sizes_are_refused_before_any_allocation() -> void:
	var good := lstm_policy()
	check_eq(PolicyRunner.new().load_dict(good), "", "the small recurrent policy loads")
	var cases := []
	for hidden in [100000000, 2147483648, 3000000, 65536]:
		var p: Dictionary = good.duplicate(true)
		p["lstm"]["hidden_size"] = hidden
		cases.append([p, "weight_ih must have 4 x hidden_size = %d rows" % (4 * hidden) if hidden <= 65536
				else "hidden_size must be a whole number from 1 to 65536, got %d" % hidden])
	var p: Dictionary = good.duplicate(true)
	p["lstm"]["input_size"] = 1e300
	cases.append([p, "input_size must be a whole number from 1 to 65536"])
	p = good.duplicate(true)
	p["lstm"]["hidden_size"] = 2.5
	cases.append([p, "hidden_size must be a whole number"])
	p = good.duplicate(true)
	p["observation_size"] = 2147483648
	cases.append([p, "observation_size must be a whole number from 1 to 65536, got 2147483648"])
	p = good.duplicate(true)
	p["action_keys"][0]["size"] = 100000000
	cases.append([p, "a \"size\" from 1 to 65536"])
	p = good.duplicate(true)
	p["obs_normalization"] = {"mean": 100000000, "var": 100000000}
	cases.append([p, "obs_normalization needs \"mean\" and \"var\" lists"])
	p = good.duplicate(true)
	p["lstm"]["after_layer"] = -3
	cases.append([p, "a layer index >= 0"])
	var start := OS.get_ticks_msec()
	for case in cases:
		var error := PolicyRunner.new().load_dict(case[0])
		check(case[1] in error, "expected an error containing '%s', got '%s'" % [case[1], error])
	check(OS.get_ticks_msec() - start < 2000, "refused at once, not after allocating")


func test_policy_must_fit_the_agent() -> void:
	var runner := PolicyRunner.new()
	runner.load_dict(_policy(12, 8, 2, "clipped_mean", [{"key": "move", "action_type": "continuous", "size": 2}]))
	var space := {"move": {"size": 2, "action_type": "continuous"}}
	check_eq(runner.check_agent("ball_chase", 12, space), "", "a fitting agent")
	check("trained on \"ball_chase\", not \"snake\"" in runner.check_agent("snake", 12, space), "wrong game")
	check("expects 12 observations, the agent gives 20" in runner.check_agent("ball_chase", 20, space), "wrong size")
	var error := runner.check_agent("ball_chase", 12, {"move": {"size": 3, "action_type": "continuous"}})
	check("its action keys [move (continuous, 2)] do not match the game's [move (continuous, 3)]" in error,
			"wrong action size, both lists named: " + error)


func test_hybrid_policy_must_have_the_games_keys() -> void:
	var runner := PolicyRunner.new()
	check_eq(runner.load_dict(_policy(12, 8, 5, "per_key", [
			{"key": "move", "action_type": "continuous", "size": 2},
			{"key": "jump", "action_type": "discrete", "size": 3}])), "", "load error")
	var space := {"jump": {"size": 3, "action_type": "discrete"}, "move": {"size": 2, "action_type": "continuous"}}
	check_eq(runner.check_agent("ball_chase", 12, space), "", "the same keys in another order fit")
	var error := runner.check_agent("ball_chase", 12, {"move": {"size": 2, "action_type": "continuous"},
			"jump": {"size": 2, "action_type": "discrete"}})
	check("its action keys [jump (discrete, 3), move (continuous, 2)] do not match the game's " \
			+ "[jump (discrete, 2), move (continuous, 2)]" in error, "a discrete size differs: " + error)
	error = runner.check_agent("ball_chase", 12, {"move": {"size": 2, "action_type": "continuous"}})
	check("[jump (discrete, 3), move (continuous, 2)] do not match the game's [move (continuous, 2)]" in error,
			"a key missing: " + error)


func test_hybrid_actions_per_key() -> void:
	# Output order: the continuous means, then each discrete key's logits (as policy_file.py writes them).
	var runner := PolicyRunner.new()
	check_eq(runner.load_dict(_policy(4, 8, 6, "per_key", [
			{"key": "move", "action_type": "continuous", "size": 2},
			{"key": "jump", "action_type": "discrete", "size": 3},
			{"key": "fire", "action_type": "discrete", "size": 1}])), "", "load error")
	check_eq(runner.outputs_to_action([1.7, -0.25, 0.1, 0.9, -1.0, 5.0]), {"move": [1.0, -0.25], "jump": 1, "fire": 0},
			"clipped mean for move, argmax for jump and fire")
