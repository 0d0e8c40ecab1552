extends Reference
# What in a game's scripts breaks copies of its scene (scene_copies.gd): everything that one
# process shares between them. A copy's physics, canvas and viewport are its own; the scene tree,
# its groups and pause, the autoloads, the global random generator and the Input singleton are not.
#
# CopiesCheck.new().findings(root) reads the scripts of a scene's nodes, their base scripts, what they preload or load,
# and the autoloads, and returns one line per finding: "res://path.gd:LINE: why". A line that says
# REFUSED names what copies cannot work with (an agent that acts through the Input singleton: every
# copy would press the same keys). Our addon's own scripts are left out: they are written for copies.
# An export keeps its scripts' source only with text scripts (the export preset's script_export_mode=0,
# which `godot-ppo export` writes); compiled scripts cannot be read, and one line says so.

const ADDON_DIR := "res://addons/rl_sync/"
const REFUSED := "REFUSED"
# [words, whether a word may follow a ".", why]: a word is found where no letter, digit or "_" touches
# it (Godot 3.2's RegEx prints an error at every search, so there is none here).
const RULES := [
	[["call_group(", "call_group_flags(", "notify_group(", "notify_group_flags(", "set_group(", "set_group_flags(",
			"get_nodes_in_group("], true, "a tree-wide group call reaches every copy's nodes, not only this copy's"],
	[["paused"], true, "the scene tree's pause stops every copy with it"],
	[["change_scene(", "change_scene_to(", "reload_current_scene("], true, "changing the tree's scene ends every copy"],
	[["current_scene"], true, "the current scene is the copies' host, not this copy (use owner or get_parent())"],
	[["get_tree().root", "OS.window_size"], true,
			"the window's root viewport is every copy's; a copy's own is get_viewport() (the window's size)"],
	[["randi(", "randf(", "rand_range(", "rand_seed(", "randomize(", "seed("], false,
			"the global random generator is shared: the copies' draws interleave, so one copy's episodes depend on the others' (give each copy a RandomNumberGenerator seeded from --env_seed)"],
	[["OS.get_cmdline_args("], true,
			"reads the command line itself: every copy sees the same --env_seed (rl_args.gd gives each copy its own)"],
	[["Input.action_press(", "Input.action_release(", "Input.parse_input_event("], true,
			REFUSED + ": the Input singleton is one per process, so every copy's agent would press the same actions; give the agent its actions directly (set_action) or run one copy per instance"],
]

var _seen := {}
var _findings := []
var _unreadable := []


# The findings of every script `root`'s nodes use, and of the autoloads (see the header).
func findings(root: Node) -> Array:
	for entry in autoloads():
		_findings.append("autoload %s (%s): one node for every copy, so its state is shared" % entry)
		check_path(entry[1])
	var nodes := [root]
	while not nodes.empty():
		var node: Node = nodes.pop_back()
		nodes += node.get_children()
		check_script(node.get_script())
	if not _unreadable.empty():
		_findings.append("%d script(s) could not be read (compiled in this export: script_export_mode=1), e.g. %s: not checked" \
				% [_unreadable.size(), _unreadable[0]])
	return _findings


# The first finding that refuses copies, or "".
static func refusal(lines: Array) -> String:
	for line in lines:
		if REFUSED in line:
			return line
	return ""


# [[name, path]] of the project's autoloads.
func autoloads() -> Array:
	var found := []
	for property in ProjectSettings.get_property_list():
		var key: String = property["name"]
		if key.begins_with("autoload/"):
			found.append([key.trim_prefix("autoload/"), str(ProjectSettings.get_setting(key)).trim_prefix("*")])
	return found


func check_path(path: String) -> void:
	if path.ends_with(".gd"):
		check_script(load(path))
	elif path.ends_with(".tscn") or path.ends_with(".scn"):
		var packed = load(path)
		if packed is PackedScene:
			var state: SceneState = packed.get_state()
			for i in range(state.get_node_count()):
				for j in range(state.get_node_property_count(i)):
					if state.get_node_property_name(i, j) == "script":
						check_script(state.get_node_property_value(i, j))


func check_script(script) -> void:
	while script is Script and script.resource_path != "" and not _seen.has(script.resource_path):
		var path: String = script.resource_path
		_seen[path] = true
		if path.begins_with(ADDON_DIR):
			return
		if not script.has_source_code():
			_unreadable.append(path)
		else:
			_findings += scan(path, script.source_code)
			for other in _loaded_paths(script.source_code):
				check_path(other)
		script = script.get_base_script()


# The findings in one script's source, one per line and rule.
func scan(path: String, source: String) -> Array:
	var found := []
	var lines := source.split("\n")
	for n in range(lines.size()):
		var code := _without_comment(lines[n])
		for rule in RULES:
			for word in rule[0]:
				if has_word(code, word, rule[1]):
					found.append("%s:%d: %s" % [path, n + 1, rule[2]])
					break
	return found


# Whether `word` is in `code` with no identifier character touching it (nor a "." before it, unless
# `after_dot`).
static func has_word(code: String, word: String, after_dot: bool) -> bool:
	var at := code.find(word)
	while at != -1:
		var before := code[at - 1] if at > 0 else " "
		var end := at + word.length()
		var after := code[end] if end < code.length() else " "
		if not _is_name_char(before) and (after_dot or before != ".") \
				and (word.ends_with("(") or not _is_name_char(after)):
			return true
		at = code.find(word, at + 1)
	return false


static func _is_name_char(c: String) -> bool:
	return c == "_" or (c >= "a" and c <= "z") or (c >= "A" and c <= "Z") or (c >= "0" and c <= "9")


# The res:// scripts and scenes a source preloads or loads: load("res://...") and preload(...).
static func _loaded_paths(source: String) -> Array:
	var paths := []
	var at := source.find("load(\"res://")
	while at != -1:
		var start := at + 6
		var end := source.find("\"", start)
		if end == -1:
			break
		var path := source.substr(start, end - start)
		if path.get_extension() in ["gd", "tscn", "scn"]:
			paths.append(path)
		at = source.find("load(\"res://", end)
	return paths


# The line without its comment and without its strings' contents (a rule's word in a string is text).
static func _without_comment(line: String) -> String:
	var out := ""
	var quote := ""
	for i in range(line.length()):
		var c := line[i]
		if quote != "":
			if c == quote and (i == 0 or line[i - 1] != "\\"):
				quote = ""
				out += c
			continue
		if c == "#":
			break
		if c == "\"" or c == "'":
			quote = c
		out += c
	return out
