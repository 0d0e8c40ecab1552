# Command-line settings shared by the sync node and the games.
#
# Every setting is passed as --key=value after the engine's own flags; a bare --flag reads as "true".
# Engine flags (--fixed-fps 60, --disable-render-loop) never reach this parser: Godot consumes them.
# Errors go through fail(), which prints one clear line on stderr and quits with exit code 1, so a
# headless instance with bad input never keeps running.

const Contract = preload("res://addons/rl_sync/contract.gd")
# Set once the unknown flags were looked at: one look per process, however many sync nodes start.
const WARNED_META := "rl_sync_flags_warned"

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
	printerr(Contract.ERROR_PREFIX + message)
	tree.quit(1)


static func has_failed() -> bool:
	return Engine.has_meta("rl_sync_failed")


static func is_headless() -> bool:
	# Debian's godot3-server (the headless export template) reports the "Server" platform.
	return OS.get_name() == "Server"


# Once per process, at start: one line on stderr for each flag given that is neither ours (contract.gd) nor the game's
# own (the project setting rl_sync/own_flags) but close to one of ours. The game ignores a flag it does not know, so a
# misspelt one would otherwise do nothing, without a word; the run goes on.
static func warn_unknown_flags() -> void:
	if Engine.has_meta(WARNED_META):
		return
	Engine.set_meta(WARNED_META, true)
	var own = ProjectSettings.get_setting(Contract.OWN_FLAGS_SETTING) \
			if ProjectSettings.has_setting(Contract.OWN_FLAGS_SETTING) else []
	for line in unknown_flag_lines(OS.get_cmdline_args(), own.split(",") if typeof(own) == TYPE_STRING else own):
		printerr(line)


# The warning lines for `args` (the command line), given the game's own flag names: a --key that is none of ours
# and resembles one of them (String.similarity >= SIMILAR_FLAG, or one letter added, dropped, changed or swapped
# with its neighbour: "agnets" is only 0.4 similar to "agents"), naming the nearest.
static func unknown_flag_lines(args: Array, own: Array) -> Array:
	var lines := []
	var theirs := []
	for name in own:
		theirs.append(str(name).strip_edges())
	for arg in args:
		var key: String = arg.substr(2, arg.length() - 2).split("=")[0] if arg.begins_with("--") else ""
		if key == "" or Contract.FLAGS.has(key) or theirs.has(key):
			continue
		var best := ""
		var best_score := 0.0
		for known in Contract.FLAGS:
			var score: float = key.similarity(known)
			if score < Contract.SIMILAR_FLAG and _one_edit_apart(key, known):
				score = Contract.SIMILAR_FLAG
			if score >= Contract.SIMILAR_FLAG and score > best_score:
				best = known
				best_score = score
		if best != "":
			lines.append(Contract.WARNING.format({"given": arg, "known": best}))
	return lines


# Whether b is a with one letter added, dropped or changed, or two neighbouring letters swapped.
static func _one_edit_apart(a: String, b: String) -> bool:
	if abs(a.length() - b.length()) > 1 or a == b:
		return false
	var i := 0
	while i < min(a.length(), b.length()) and a[i] == b[i]:
		i += 1
	var rest_a := a.substr(i, a.length() - i)
	var rest_b := b.substr(i, b.length() - i)
	return (rest_a.substr(1, rest_a.length()) == rest_b.substr(1, rest_b.length())  # changed
			or rest_a.substr(1, rest_a.length()) == rest_b or rest_a == rest_b.substr(1, rest_b.length())  # added, dropped
			or (rest_a.length() >= 2 and rest_b.length() >= 2 and rest_a[0] == rest_b[1] and rest_a[1] == rest_b[0]
				and rest_a.substr(2, rest_a.length()) == rest_b.substr(2, rest_b.length())))  # swapped
