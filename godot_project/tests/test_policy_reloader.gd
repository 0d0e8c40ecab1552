extends "res://tests/test_case.gd"
# --policy_reload (policy_reloader.gd): a new file replaces the policy; a half-written, damaged or
# mismatched one keeps the previous policy and is tried again at its next change; a missing file is
# waited for; a bundle reloads all its policies. The clock is the test's own (poll's now_msec), so no
# test waits for real time.

const PolicyReloader = preload("res://addons/rl_sync/policy_reloader.gd")
const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const TestPolicyRunner = preload("res://tests/test_policy_runner.gd")

const ACTION_SPACE := {"move": {"size": 2, "action_type": "continuous"}}

var _path := ""
var _clock := 0
# The policies the reloader hands new versions to: one agent of 4 observations.
var _policies: PolicySet = null


func _policy_text(global_step: int, bias: float, env: String = "ball_chase") -> String:
	var policy := {
		"format": "godot-ppo-policy", "version": 1, "env": env, "observation_size": 4,
		"action_keys": [{"key": "move", "action_type": "continuous", "size": 2}],
		"action_rule": "clipped_mean", "obs_normalization": null,
		"layers": [{"weight": [[0.5, 0, 0, 0], [0, 0.5, 0, 0]], "bias": [bias, -bias], "activation": "linear"}],
		"source": {"global_step": global_step},
	}
	return to_json(policy)


func _write(text: String) -> void:
	var file := File.new()
	file.open(_path, File.WRITE)
	file.store_string(text)
	file.close()


func _reloader(text: String = _policy_text(100, 0.1), agents: Array = [["shared_policy", 4]]) -> PolicyReloader:
	_path = "%s/rl_sync_reload_test_%d.json" % [OS.get_environment("TMPDIR") if OS.get_environment("TMPDIR") != "" else "/tmp", OS.get_process_id()]
	_write(text)
	var specs := []
	for agent in agents:
		specs.append({"label": "agent %d" % specs.size(), "policy": agent[0], "obs_size": agent[1],
				"action_space": ACTION_SPACE})
	_policies = PolicySet.new("ball_chase", specs)
	check_eq(_policies.load_files([_path], {_path: text}), "", "the first file loads")
	return PolicyReloader.new(_path, _policies, text)


# The next poll is due: the reloader checks a few times a second, not every call. Returns the runner
# of agent 0 when the file was reloaded, else null.
func _poll(reloader: PolicyReloader):
	_clock += PolicyReloader.CHECK_EVERY_MSEC
	return _policies._runner_of[0] if reloader.poll(_clock) else null


func cleanup() -> void:
	if _path != "":
		Directory.new().remove(_path)


func test_unchanged_file_is_not_reloaded() -> void:
	var reloader := _reloader()
	check(_poll(reloader) == null, "the file that was loaded is not loaded again")
	check(_poll(reloader) == null, "nor at the next check")
	check_eq(reloader.reloads, 0, "reloads")


func test_a_new_file_replaces_the_policy() -> void:
	var reloader := _reloader()
	_write(_policy_text(200, 0.3))  # within the same second as the first write: found by its text
	var runner = _poll(reloader)
	check(runner != null, "the new file is loaded")
	if runner != null:
		check_eq(int(runner.source["global_step"]), 200, "the new file's global step")
		check_near(runner.act([0, 0, 0, 0])["move"][0], 0.3, 1e-6, "the new network acts")
	check_eq(reloads_of(reloader), 1, "reloads")
	check(_poll(reloader) == null, "and only once")


func test_checks_are_spaced_out() -> void:
	var reloader := _reloader()
	_poll(reloader)
	_write(_policy_text(200, 0.3))
	check(not reloader.poll(_clock + 1), "no check 1 ms after the last one")
	check(_poll(reloader) != null, "the next check finds the file")


func test_half_written_file_keeps_the_previous_policy() -> void:
	var reloader := _reloader()
	var full := _policy_text(300, 0.5)
	_write(full.substr(0, full.length() / 2))
	check(_poll(reloader) == null, "a half-written file is not loaded")
	check_eq(reloader.refused, 1, "refused once")
	check(_poll(reloader) == null, "nor retried while it does not change")
	check_eq(reloader.refused, 1, "still refused once")
	_write(full)
	var runner = _poll(reloader)
	check(runner != null, "the completed file is loaded at its next change")
	if runner != null:
		check_eq(int(runner.source["global_step"]), 300, "the completed file's global step")


func test_other_bad_files_keep_the_previous_policy() -> void:
	var reloader := _reloader()
	for text in ["", "not json", "{\"format\": \"something else\"}", _policy_text(400, 0.1, "snake"),
			_policy_text(400, NAN)]:
		_write(text)
		check(_poll(reloader) == null, "not loaded: %s" % text.substr(0, 40))
	check_eq(reloader.refused, 5, "each bad version refused once")
	check_eq(reloader.reloads, 0, "nothing reloaded")


# A file claiming a huge LSTM is refused before anything is allocated from its sizes (it used to
# exhaust memory and crash the watch window): the previous policy keeps playing.
func test_a_file_with_huge_sizes_keeps_the_previous_policy() -> void:
	var reloader := _reloader()
	for hidden in [100000000, 2147483648]:
		var policy: Dictionary = TestPolicyRunner.lstm_policy()
		policy["lstm"]["hidden_size"] = hidden
		policy["observation_size"] = 4
		_write(to_json(policy))
		check(_poll(reloader) == null, "hidden_size %d is not loaded" % hidden)
	check_eq(reloader.refused, 2, "each refused once")
	_write(_policy_text(600, 0.4))
	var runner = _poll(reloader)
	check(runner != null, "a good file after them is loaded")


func test_missing_file_is_waited_for() -> void:
	var reloader := _reloader()
	Directory.new().remove(_path)
	check(_poll(reloader) == null, "a missing file keeps the policy")
	check_eq(reloader.refused, 0, "and is not a refused file")
	_write(_policy_text(500, 0.2))
	check(_poll(reloader) != null, "the file that comes back is loaded")


func reloads_of(reloader: PolicyReloader) -> int:
	return reloader.reloads


# A bundle (two policies of one game) reloads both at once, and only when both still fit.
func test_a_bundle_reloads_all_its_policies() -> void:
	var reloader := _reloader(_bundle_text(100, 0.1), [["a", 4], ["b", 4]])
	_write(_bundle_text(200, 0.3))
	check(_poll(reloader) != null, "the new bundle is loaded")
	check_near(_policies.act([0, 0, 0, 0], 0)["move"][0], 0.3, 1e-6, "policy a's new network acts")
	check_near(_policies.act([0, 0, 0, 0], 1)["move"][0], -0.3, 1e-6, "policy b's new network acts")
	var one_only: Dictionary = parse_json(_bundle_text(300, 0.5))
	one_only["policies"].pop_back()
	_write(to_json(one_only))
	check(_poll(reloader) == null, "a bundle without b's policy is refused")
	check_near(_policies.act([0, 0, 0, 0], 1)["move"][0], -0.3, 1e-6, "b keeps its network")


# Policy a's network adds `bias` to its first output, b's subtracts it.
func _bundle_text(global_step: int, bias: float) -> String:
	var entries := []
	for entry in [["a", bias], ["b", -bias]]:
		var policy: Dictionary = parse_json(_policy_text(global_step, entry[1]))
		policy["version"] = 3
		policy["policy_name"] = entry[0]
		entries.append(policy)
	return to_json({"format": "godot-ppo-policy", "version": 3, "env": "ball_chase", "policies": entries,
			"source": {"global_step": global_step}})
