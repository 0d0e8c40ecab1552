extends Reference
# A run that reports numbers from the engine alone (--eval_episodes, --benchmark_steps) must not report a
# broken game's: Godot goes on after a script error (the function stops there) and exits 0. Godot 3.2
# gives a script no way to hear its own errors, so such a run, started by a person, starts itself again
# as a child with the same command line, reads the child's whole output (stdout and stderr), shows it,
# and fails with the first SCRIPT ERROR's line; otherwise it exits with the child's status. godot-ppo
# reads a game's output itself and passes --rl_sync_watched (WATCHED_FLAG) to skip the second process
# (python_trainer/engine/in_engine.py declares the same flag). The child is in the watcher's process
# group: Ctrl-C at the terminal ends both; whoever kills the watcher alone ends its process tree.

const Contract = preload("res://addons/rl_sync/contract.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

const WATCHED_FLAG := "rl_sync_watched"
const MARK := Contract.ENGINE_SCRIPT_ERROR


# True when this process became the watcher of a child that runs the game (it quits when the child
# ends); false when the run goes on here.
static func watch_in_child(tree: SceneTree) -> bool:
	var mode := watched_mode()
	if mode == "" or RlArgs.has(WATCHED_FLAG):
		return false
	var argv := own_command_line()
	if argv.empty():
		return false  # not Linux's /proc: run unwatched rather than not at all
	argv.append("--" + WATCHED_FLAG)
	var output := []
	var status := OS.execute(OS.get_executable_path(), PoolStringArray(argv), true, output, true)
	var text: String = output[0] if not output.empty() else ""
	show(text)
	var error := first_script_error(text)
	if error != "":
		RlArgs.fail(tree, "the game raised a script error during --%s, so its numbers are not the policy's: %s (fix the game's script)" % [mode, error])
	else:
		tree.quit(status)
	return true


# The child's output, whose two streams came merged: Godot's and the addon's error lines (and the
# "At:" lines after them) back on stderr, where a caller of the run looks for them; the rest on stdout.
static func show(text: String) -> void:
	var lines := text.split("\n")
	if lines.size() > 0 and lines[lines.size() - 1] == "":
		lines.remove(lines.size() - 1)
	var on_stderr := false
	for line in lines:
		var stripped: String = line.strip_edges()
		if stripped.begins_with(Contract.ENGINE_AT):
			pass  # where the error line before it happened: on its stream
		else:
			on_stderr = line.begins_with(Contract.ENGINE_ERROR) or line.begins_with(MARK) \
					or line.begins_with(Contract.ENGINE_WARNING) or line.begins_with(Contract.ERROR_PREFIX) \
					or line.begins_with(Contract.WARNING_PREFIX)
		if on_stderr:
			printerr(line)
		else:
			print(line)


# The run mode that reports numbers, or "".
static func watched_mode() -> String:
	if RlArgs.has("eval_episodes"):
		return "eval_episodes"
	if RlArgs.has("benchmark_steps"):
		return "benchmark_steps"
	return ""


# This process's arguments as it was started (the engine's own, --path and --fixed-fps, included,
# which the arguments a script is given leave out), from /proc/self/cmdline; [] where it is not there.
static func own_command_line() -> Array:
	var file := File.new()
	if file.open("/proc/self/cmdline", File.READ) != OK:
		return []
	var bytes := PoolByteArray()
	while true:
		var b := file.get_8()
		if file.eof_reached():
			break
		bytes.append(b)
	file.close()
	var argv := []
	var start := 0
	for i in range(bytes.size()):
		if bytes[i] == 0:
			argv.append(bytes.subarray(start, i - 1).get_string_from_utf8() if i > start else "")
			start = i + 1
	return argv.slice(1, argv.size() - 1) if argv.size() > 1 else []


# The first script error in `text`, with the "At:" line that says where, in one line; "" if none.
static func first_script_error(text: String) -> String:
	var at := text.find(MARK)
	if at < 0:
		return ""
	var lines := text.substr(at).split("\n", false, 2)
	var said: String = lines[0].strip_edges()
	if lines.size() > 1 and lines[1].strip_edges().begins_with(Contract.ENGINE_AT):
		said += "; " + lines[1].strip_edges()
	return said
