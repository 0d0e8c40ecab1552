extends Reference
# --record_demos=FILE: records the episodes of one agent (--record_agent=I, default 0: the one the
# keyboard drives) whatever drives it (the keyboard, --policy=FILE, --policy=random) as
# demonstrations for `godot-ppo train --demos`.
#
# The file keeps the shape of godot_rl_agents' demo.json, so their tools read ours and ours theirs: a
# JSON array of episodes, each [observations, actions, meta]. observations: the agent's flat
# observations, one more than actions (the last one follows the final action); actions: one flat list
# per step, the action keys in sorted order (the order env_info lists them: Godot's to_json sorts a
# Dictionary's keys), a continuous key's values then a discrete key's index. meta, a third element their reader never looks at, holds what we add: the game, its spaces,
# the rewards and how the episode ended. docs/demonstrations.md describes the format.
#
# Each episode is appended to the file as it ends (demo_file.gd), so a closed window loses at most the
# episode in progress, and the episodes already there are never rewritten. An existing file is
# appended to only when its episodes are of the same game and spaces; otherwise the run refuses to
# start and the file is left as it was. Backspace drops the last episode recorded in this run (never
# an earlier run's).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const DemoFile = preload("res://addons/rl_sync/demo_file.gd")

const FORMAT := RlArgs.Contract.DEMO_FORMAT
const DROP_KEY := KEY_BACKSPACE

var path := ""
var file := DemoFile.new()
var agent_index := 0
# Quit after this many episodes of this run (--record_episodes; 0: until the window closes).
var episodes_wanted := 0
var recorded_here := 0

var _game := ""
var _obs_size := 0
var _action_space := {}
# The action keys in the order of an action row (sorted).
var _keys := []
var _obs := []
var _actions := []
var _rewards := []
var _drop_was_down := false


# Reads --record_demos and --record_agent, and the file when it exists. Returns "" or what is wrong
# (one line naming the file, the episode and the fix).
func start(game: String, agents: Array, action_spaces: Array) -> String:
	path = RlArgs.get_string("record_demos", "")
	if path == "true":
		return "--record_demos needs a file: --record_demos=demos.json"
	if path.is_rel_path() and OS.get_environment("PWD") != "":
		path = OS.get_environment("PWD").plus_file(path)
	var index := RlArgs.get_string("record_agent", "0")
	if not index.is_valid_integer() or int(index) < 0 or int(index) >= agents.size():
		return "--record_agent=%s is not valid: give an agent index from 0 to %d" % [index, agents.size() - 1]
	agent_index = int(index)
	var wanted := RlArgs.get_string("record_episodes", "0")
	if not wanted.is_valid_integer() or int(wanted) < 0:
		return "--record_episodes=%s is not valid: give an integer >= 0 (0: until the window closes)" % wanted
	episodes_wanted = int(wanted)
	configure(game, agents[agent_index].get_obs().size(), action_spaces[agent_index])
	return file.open(path, funcref(self, "_mismatch"))


# The game and the recorded agent's spaces (start() reads them from the scene; tests set them).
func configure(game: String, obs_size: int, action_space: Dictionary) -> void:
	_game = game
	_obs_size = obs_size
	_action_space = action_space
	_keys = _action_space.keys()
	_keys.sort()


# Why an existing episode cannot share a file with this game's (its meta when it has one, its sizes
# otherwise), or "".
func _mismatch(episode) -> String:
	if typeof(episode) != TYPE_ARRAY or episode.size() < 2 or typeof(episode[0]) != TYPE_ARRAY or typeof(episode[1]) != TYPE_ARRAY:
		return "is not [observations, actions]"
	if episode.size() > 2 and typeof(episode[2]) == TYPE_DICTIONARY:
		var meta: Dictionary = episode[2]
		if meta.get("game", _game) != _game:
			return "is of the game '%s', not '%s'" % [meta["game"], _game]
		if to_json(meta.get("action_space", _action_space)) != to_json(_action_space):
			return "has the action keys %s, not %s" % [to_json(meta["action_space"]), to_json(_action_space)]
	if not episode[0].empty() and typeof(episode[0][0]) == TYPE_ARRAY and episode[0][0].size() != _obs_size:
		return "has observations of %d values, not %d" % [episode[0][0].size(), _obs_size]
	return ""


# After every decision step of a local mode, with RLSync's step (DecisionStep.json or .first).
func on_step(step: Dictionary, first: bool) -> String:
	var i := agent_index
	var obs = step["obs"][i]["obs"]
	if first:
		_obs = [obs]
		return ""
	_rewards.append(step["reward"][i])
	if not step["done"][i]:
		_obs.append(obs)
		return ""
	var info: Dictionary = step["info"][i]
	_obs.append(info["terminal_observation"]["obs"])
	var meta := {
		"format": FORMAT,
		"game": _game,
		"obs_size": _obs_size,
		"action_space": _action_space,
		"action_keys": _action_keys(),
		"rewards": _rewards,
		"terminated": not info["TimeLimit.truncated"],
		"truncated": info["TimeLimit.truncated"],
	}
	var bad := _non_finite(_obs + [_rewards])
	if bad != "":
		# JSON has no NaN: writing it would spoil the whole file, so the file stays as it was.
		return "--record_demos=%s: episode %d holds %s; the file keeps the %d episodes before it: fix the game's get_obs() or its reward" % [
				path, file.count, bad.replace("observation %d" % _obs.size(), "its rewards"), file.count]
	file.path = path
	var error := file.append([_obs, _actions, meta])
	if error == "":
		recorded_here += 1
	_obs = [obs]
	_actions = []
	_rewards = []
	return error


# "" or which observation of the episode holds NaN or an infinity.
func _non_finite(observations: Array) -> String:
	for t in range(observations.size()):
		for value in observations[t]:
			if is_nan(value) or is_inf(value):
				return "%s in observation %d" % [str(value), t]
	return ""


# The action the agent was given for the last observation, flattened: the keys in their declared
# order, a continuous key's values, a discrete key's index.
func on_action(i: int, action: Dictionary) -> void:
	if i != agent_index:
		return
	var flat := []
	for key in _keys:
		if _action_space[key]["action_type"] == "discrete":
			flat.append(int(action[key]))
		else:
			for value in action[key]:
				flat.append(float(value))
	_actions.append(flat)


# An action row's layout: [[key, action_type, size], ...] in the row's order.
func _action_keys() -> Array:
	var layout := []
	for key in _keys:
		layout.append([key, _action_space[key]["action_type"], int(_action_space[key]["size"])])
	return layout


# The drop key, once per press: the last episode of this run goes, and the file is rewritten.
func poll_drop_key() -> String:
	var down := Input.is_key_pressed(DROP_KEY)
	var pressed := down and not _drop_was_down
	_drop_was_down = down
	if not pressed or recorded_here == 0:
		return ""
	var error := file.drop_last()
	if error == "":
		recorded_here -= 1
		print("rl_sync: dropped the last episode (%d recorded in %s)" % [file.count, path])
	return error


func is_done() -> bool:
	return episodes_wanted > 0 and recorded_here >= episodes_wanted


func summary() -> String:
	return "recording agent %d: %d episodes, %d steps (this run: %d; Backspace drops the last)" % [
			agent_index, file.count, file.steps, recorded_here]
