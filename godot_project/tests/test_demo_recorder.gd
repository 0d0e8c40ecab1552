extends "res://tests/test_case.gd"
# --record_demos (demo_recorder.gd) without a scene: the steps RLSync hands it become godot_rl_agents'
# [observations, actions] with our meta, the action row in sorted key order; an episode with NaN is
# refused and leaves the file as it was; a file of another game is refused; an episode is appended
# (the bytes before it kept) with 9 significant digits, and the drop key takes it back.

const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const DemoFile = preload("res://addons/rl_sync/demo_file.gd")

const SPACE := {"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 3, "action_type": "discrete"}}

var _path := ""


func _recorder() -> DemoRecorder:
	_path = "%s/rl_sync_demo_test_%d.json" % [OS.get_environment("TMPDIR") if OS.get_environment("TMPDIR") != "" else "/tmp", OS.get_process_id()]
	Directory.new().remove(_path)
	var recorder := DemoRecorder.new()
	recorder.path = _path
	recorder.configure("fake", 2, SPACE)
	return recorder


func _step(obs: Array, reward: float, done: bool, terminal := []) -> Dictionary:
	var info := {}
	if done:
		info = {"terminal_observation": {"obs": terminal}, "TimeLimit.truncated": false}
	return {"obs": [{"obs": obs}], "reward": [reward], "done": [done], "info": [info]}


func _file_text() -> String:
	var file := File.new()
	if file.open(_path, File.READ) != OK:
		return ""
	var text := file.get_as_text()
	file.close()
	return text


func test_an_episode_is_written_in_their_shape_with_our_meta() -> void:
	var recorder := _recorder()
	check_eq(recorder.on_step(_step([0.0, 1.0], 0.0, false), true), "", "first step")
	recorder.on_action(0, {"move": [0.5, -0.5], "jump": 2})
	check_eq(recorder.on_step(_step([0.5, 1.0], 1.0, false), false), "", "second step")
	recorder.on_action(0, {"move": [1.0, 0.0], "jump": 0})
	recorder.on_action(1, {"move": [9.0, 9.0], "jump": 1})  # another agent: not recorded
	check_eq(recorder.on_step(_step([0.0, 2.0], 0.5, true, [1.5, 1.0]), false), "", "last step")
	var episodes = JSON.parse(_file_text()).result
	check_eq(episodes.size(), 1, "episodes in the file")
	check_eq(episodes[0][0], [[0.0, 1.0], [0.5, 1.0], [1.5, 1.0]], "observations: one more than actions")
	check_eq(episodes[0][1], [[2.0, 0.5, -0.5], [0.0, 1.0, 0.0]], "actions: jump's index, then move's values")
	var meta: Dictionary = episodes[0][2]
	check_eq([meta["game"], meta["rewards"], meta["terminated"], meta["truncated"]], ["fake", [1.0, 0.5], true, false], "meta")
	check_eq(meta["action_keys"], [["jump", "discrete", 3.0], ["move", "continuous", 2.0]], "the row's layout")


func test_an_episode_with_nan_is_refused_and_the_file_kept() -> void:
	var recorder := _recorder()
	recorder.on_step(_step([0.0, 1.0], 0.0, false), true)
	recorder.on_action(0, {"move": [0.0, 0.0], "jump": 1})
	recorder.on_step(_step([0.0, 1.0], 1.0, true, [0.0, 1.0]), false)
	var before := _file_text()
	recorder.on_action(0, {"move": [0.0, 0.0], "jump": 1})
	var error := recorder.on_step(_step([0.0, 1.0], 1.0, true, [NAN, 1.0]), false)
	check(error.find("episode 1 holds nan in observation 1") != -1, "NaN named: " + error)
	check_eq(_file_text(), before, "the file as it was")
	check_eq(recorder.file.count, 1, "episodes kept")


func test_episodes_are_appended_with_their_digits_and_dropped() -> void:
	var recorder := _recorder()
	recorder.on_step(_step([1.2e-07, 0.123456789], 0.0, false), true)
	recorder.on_action(0, {"move": [0.25, -1.0], "jump": 1})
	recorder.on_step(_step([0.0, 1.0], 1.0, true, [-2.5e-12, 1e20]), false)
	var first := _file_text()
	check_eq(first, "[[[[1.2e-7,0.123456789],[-2.5e-12,1e20]],[[1,0.25,-1]],%s]]" % DemoFile.to_text(
			JSON.parse(first).result[0][2]), "9 significant digits")
	recorder.on_action(0, {"move": [0.0, 0.0], "jump": 2})
	recorder.on_step(_step([0.0, 1.0], 1.0, true, [3.5, 1.0]), false)
	var second := _file_text()
	check_eq(second.substr(0, first.length() - 1), first.substr(0, first.length() - 1), "the first episode's bytes kept")
	check_eq(JSON.parse(second).result.size(), 2, "two episodes")
	check_eq(recorder.file.drop_last(), "", "dropped")
	check_eq(JSON.parse(_file_text()).result.size(), 1, "one episode after the drop")
	check_eq(_file_text().strip_edges(), first, "the file as it was, but for blanks")
	recorder.on_action(0, {"move": [0.0, 0.0], "jump": 0})
	recorder.on_step(_step([0.0, 1.0], 1.0, true, [4.5, 1.0]), false)
	var episodes = JSON.parse(_file_text()).result
	check_eq([episodes.size(), episodes[1][0][1]], [2, [4.5, 1.0]], "appended after the drop")
	var folder := DemoFile.new().open(_path.get_base_dir() + "/", funcref(recorder, "_mismatch"))
	check(folder.find("is a folder: give a file in it") != -1, "a folder refused: " + folder)


func test_a_file_of_another_game_is_refused() -> void:
	var recorder := _recorder()
	check(recorder._mismatch([[[0, 0]], [], {"game": "pong"}]).find("of the game 'pong', not 'fake'") != -1, "another game")
	check(recorder._mismatch([[[0, 0, 0], [0, 0, 0]], [[1, 0, 0]]]).find("observations of 3 values, not 2") != -1, "another size")
	check_eq(recorder._mismatch([[[0, 0], [0, 0]], [[1, 0, 0]], {"game": "fake", "action_space": SPACE}]), "", "the same game")


func cleanup() -> void:
	if _path != "":
		Directory.new().remove(_path)
		Directory.new().remove(_path + ".tmp")
