extends "res://tests/test_case.gd"
# The editor's Play (a run from the project folder with no mode flag): how the game tells a folder
# from an export, which port it looks at, and that its one look never holds up the start for long.

const RunFlags = preload("res://addons/rl_sync/run_flags.gd")
const TrainerHandshake = preload("res://addons/rl_sync/trainer_handshake.gd")
const Result = preload("res://addons/rl_sync/result.gd")


func test_the_test_runner_runs_from_the_project_folder() -> void:
	# godot3-server --path godot_project: project.godot is a file here; an export holds project.binary.
	check(RunFlags.from_project_folder(), "a run from the project folder is told from an export")


func test_the_editor_port_is_the_project_setting_else_godot_rls_default() -> void:
	if OS.get_environment(RunFlags.EDITOR_PORT_VARIABLE) != "":
		return  # the variable wins over the setting: nothing of the setting to see here
	check_eq(RunFlags.editor_port(), RunFlags.DEFAULT_EDITOR_PORT, "without the setting")
	ProjectSettings.set_setting(RunFlags.EDITOR_PORT_SETTING, 23456)
	check_eq(RunFlags.editor_port(), 23456, "the project setting")
	ProjectSettings.set_setting(RunFlags.EDITOR_PORT_SETTING, "not a port")
	check_eq(RunFlags.editor_port(), 0, "a setting that is not a port")
	ProjectSettings.set_setting(RunFlags.EDITOR_PORT_SETTING, 70000)
	check_eq(RunFlags.editor_port(), 0, "a number above 65535")
	ProjectSettings.set_setting(RunFlags.EDITOR_PORT_SETTING, null)  # clears it
	check(not ProjectSettings.has_setting(RunFlags.EDITOR_PORT_SETTING), "the setting is cleared again")


func test_a_port_that_accepts_but_never_answers_is_given_up_within_the_time() -> void:
	var server := TCP_Server.new()
	var port := 0
	for _i in range(20):
		var candidate := 20000 + randi() % 40000
		if server.listen(candidate, "127.0.0.1") == OK:
			port = candidate
			break
	check(port != 0, "a local port to listen on")
	if port == 0:
		return
	var handshake := TrainerHandshake.new("test", 1, 64)
	var start := OS.get_ticks_msec()
	var looked: Reference = handshake.try_connect(port, 0.3)
	var took := OS.get_ticks_msec() - start
	check_eq([looked.kind, looked.message], [Result.Kind.FAILED, "connected, but the trainer sent no handshake in time; quitting"],
			"what the look says")
	check(took < 1000, "the look took %d ms for a 0.3 s limit" % took)
	handshake.stream.disconnect_from_host()
	server.stop()
	start = OS.get_ticks_msec()
	check_eq(handshake.try_connect(port, 0.3).message, "no trainer listens on 127.0.0.1:%d" % port, "a closed port")
	check(OS.get_ticks_msec() - start < 1000, "a refused connection is given up at once")
