# Command-line settings shared by the sync node and the games.
#
# Every setting is passed as --key=value after the engine's own flags; a bare --flag reads as "true".
# Engine flags (--fixed-fps 60, --disable-render-loop) never reach this parser: Godot consumes them.
# Errors go through fail(), which prints one clear line on stderr and quits with exit code 1, so a
# headless instance with bad input never keeps running.

# While scene_copies.gd builds a copy of the scene, that copy's own settings (its --env_seed) stand in
# for the command line's, so the copy's scripts read them as a run of one reads its own.
const OVERRIDE_META := "rl_sync_args_override"


static func parse() -> Dictionary:
	var result := {}
	for arg in OS.get_cmdline_args():
		if not arg.begins_with("--"):
			continue
		var body: String = arg.substr(2, arg.length() - 2)
		var eq := body.find("=")
		if eq == -1:
			result[body] = "true"
		else:
			result[body.substr(0, eq)] = body.substr(eq + 1, body.length() - eq - 1)
	if Engine.has_meta(OVERRIDE_META):
		var override: Dictionary = Engine.get_meta(OVERRIDE_META)
		for key in override:
			result[key] = override[key]
	return result


# The settings that stand in for the command line's until the next call ({}: none).
static func set_override(values: Dictionary) -> void:
	if values.empty():
		if Engine.has_meta(OVERRIDE_META):
			Engine.remove_meta(OVERRIDE_META)
	else:
		Engine.set_meta(OVERRIDE_META, values.duplicate())


static func has(key: String) -> bool:
	return parse().has(key)


static func get_string(key: String, default_value: String = "") -> String:
	return parse().get(key, default_value)


# Returns the integer setting, or null after failing when it is not an integer in
# [min_value, max_value].
static func get_int(tree: SceneTree, key: String, default_value: int, min_value: int = 1,
		max_value: int = 0x7FFFFFFF):
	var args := parse()
	if not args.has(key):
		return default_value
	var text: String = args[key]
	if not text.is_valid_integer() or int(text) < min_value or int(text) > max_value:
		var bounds := ">= %d" % min_value if max_value == 0x7FFFFFFF else "from %d to %d" % [min_value, max_value]
		fail(tree, "--%s=%s is not valid: give an integer %s, for example --%s=%d" % [
				key, text, bounds, key, max(default_value, min_value)])
		return null
	return int(text)


# Returns the float setting, or null after failing when it is not a number > 0.
static func get_positive_float(tree: SceneTree, key: String, default_value: float):
	var args := parse()
	if not args.has(key):
		return default_value
	var text: String = args[key]
	if not text.is_valid_float() or float(text) <= 0.0:
		fail(tree, "--%s=%s is not valid: give a number > 0, for example --%s=%s" % [
				key, text, key, str(default_value)])
		return null
	return float(text)


# Prints the error on stderr and quits with code 1. The flag on Engine lets other nodes that run
# later in the same frame (the sync node's deferred start) skip blocking work.
static func fail(tree: SceneTree, message: String) -> void:
	if has_failed():
		return
	Engine.set_meta("rl_sync_failed", true)
	printerr("rl_sync: error: " + message)
	tree.quit(1)


static func has_failed() -> bool:
	return Engine.has_meta("rl_sync_failed")


static func is_headless() -> bool:
	# Debian's godot3-server (the headless export template) reports the "Server" platform.
	return OS.get_name() == "Server"
