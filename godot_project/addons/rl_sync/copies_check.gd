extends Reference
# What in a game's scripts breaks copies of its scene (scene_copies.gd): everything that one
# process shares between them. A copy's physics, canvas and viewport are its own; the scene tree,
# its groups and pause, the autoloads, the global random generator and the Input singleton are not.
#
# CopiesCheck.new().findings(root) reads the scripts of a scene's nodes, their base scripts, what they preload or load
# (either quotes, paths relative to the script's folder too), the global classes (class_name) they name, and the
# autoloads, and returns one finding per line found: {"line": "res://path.gd:LINE: why", "refuses": bool}. A finding
# that refuses names what copies cannot work with (an agent that acts through the Input singleton: every copy would
# press the same keys; its line says REFUSED). Our addon's own scripts are left out: they are written for copies.
# Spaces and tabs around ".", "(" and ")" do not hide a word (`Input .action_press ("x")`). A call built at run time
# does (a string given to Input.call): input_watch.gd catches its effect while the copies run.
# An export keeps its scripts' source only with text scripts (the export preset's script_export_mode=0,
# which `godot-ppo export` writes); compiled scripts cannot be read, and one line says so.

const ADDON_DIR := "res://addons/rl_sync/"
const REFUSED := "REFUSED"
# [words, whether a word may follow a ".", why, whether it refuses copies]: a word is found where no letter,
# digit or "_" touches it (Godot 3.2's RegEx prints an error at every search, so there is none here).
const RULES := [
	[["call_group(", "call_group_flags(", "notify_group(", "notify_group_flags(", "set_group(", "set_group_flags(",
			"get_nodes_in_group("], true, "a tree-wide group call reaches every copy's nodes, not only this copy's", false],
	[["paused", "set_pause("], true, "the scene tree's pause stops every copy with it", false],
	[["change_scene(", "change_scene_to(", "reload_current_scene("], true, "changing the tree's scene ends every copy",
			false],
	[["current_scene", "get_current_scene("], true,
			"the current scene is the copies' host, not this copy (use owner or get_parent())", false],
	[["get_tree().root", "get_tree().get_root(", "OS.window_size"], true,
			"the window's root viewport is every copy's; a copy's own is get_viewport() (the window's size)", false],
	[["randi(", "randf(", "rand_range(", "rand_seed(", "randomize(", "seed("], false,
			"the global random generator is shared: the copies' draws interleave, so one copy's episodes depend on the others' (give each copy a RandomNumberGenerator seeded from --env_seed)",
			false],
	[["OS.get_cmdline_args("], true,
			"reads the command line itself: every copy sees the same --env_seed (rl_args.gd gives each copy its own)", false],
	[["Input.action_press(", "Input.action_release(", "Input.parse_input_event("], true,
			REFUSED + ": copies share one Input singleton, so every copy's agent would press the same actions: give each agent its actions through its controller's set_action, or run with --copies 1",
			true],
]

var _seen := {}
var _findings := []
var _unreadable := []
var _classes = null  # [[class_name, path]] of the project's global classes, once read


# The findings of every script `root`'s nodes use, and of the autoloads (see the header).
func findings(root: Node) -> Array:
	for entry in autoloads():
		_findings.append(finding("autoload %s (%s): one node for every copy, so its state is shared" % entry))
		check_path(entry[1])
	var nodes := [root]
	while not nodes.empty():
		var node: Node = nodes.pop_back()
		nodes += node.get_children()
		check_script(node.get_script())
	if not _unreadable.empty():
		_findings.append(finding(("%d script(s) could not be read (compiled in this export: script_export_mode=1), e.g. "
				+ "%s: not checked") % [_unreadable.size(), _unreadable[0]]))
	return _findings


# One finding: its line, and whether it refuses copies.
static func finding(line: String, refuses := false) -> Dictionary:
	return {"line": line, "refuses": refuses}


# The findings' lines, as they are printed and sent in env_info.
static func lines_of(found: Array) -> Array:
	var lines := []
	for one in found:
		lines.append(one["line"])
	return lines


# The line of the first finding that refuses copies, or "".
static func refusal(found: Array) -> String:
	for one in found:
		if one["refuses"]:
			return one["line"]
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
	if not ResourceLoader.exists(path):  # a path in a comment, or one the game never loads
		return
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
			for other in loaded_paths(script.source_code, path) + _named_classes(script.source_code):
				check_path(other)
		script = script.get_base_script()


# The findings in one script's source (see finding()), one per line and rule.
func scan(path: String, source: String) -> Array:
	var found := []
	var lines := source.split("\n")
	for n in range(lines.size()):
		var code := _squeezed(_without_comment(lines[n]))
		for rule in RULES:
			for word in rule[0]:
				if has_word(code, word, rule[1]):
					found.append(finding("%s:%d: %s" % [path, n + 1, rule[2]], rule[3]))
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


# The scripts and scenes a source preloads or loads: load("res://a.gd"), preload('b.tscn') (relative to `from_path`'s
# folder), ResourceLoader.load(...), with any spaces or tabs before the "(" or the path.
static func loaded_paths(source: String, from_path: String) -> Array:
	var paths := []
	var at := source.find("load")
	while at != -1:
		var i := at + 4
		while i < source.length() and source[i] in " \t":
			i += 1
		var opens := i < source.length() and source[i] == "(" and (at == 0 or not _is_name_char(source[at - 1]) \
				or source.substr(max(0, at - 3), 3) == "pre")
		i += 1
		while opens and i < source.length() and source[i] in " \t":
			i += 1
		if opens and i < source.length() and source[i] in "\"'":
			var end := source.find(source[i], i + 1)
			var path := source.substr(i + 1, end - i - 1) if end != -1 else ""
			if not path.begins_with("res://") and not "://" in path and path != "":
				path = _resolved(from_path.get_base_dir().plus_file(path))
			if path.begins_with("res://") and path.get_extension() in ["gd", "tscn", "scn"]:
				paths.append(path)
		at = source.find("load", at + 4)
	return paths


# A res:// path without its "." and ".." parts (Godot 3.2's String has no simplify_path).
static func _resolved(path: String) -> String:
	var parts := []
	for part in path.trim_prefix("res://").split("/"):
		if part == "..":
			parts.pop_back()
		elif part != "." and part != "":
			parts.append(part)
	return "res://" + PoolStringArray(parts).join("/")


# The scripts of the project's global classes (class_name) that a source names.
func _named_classes(source: String) -> Array:
	if _classes == null:
		_classes = []
		var key := "_global_script_classes"
		var declared = ProjectSettings.get_setting(key) if ProjectSettings.has_setting(key) else []
		for entry in declared if typeof(declared) == TYPE_ARRAY else []:
			_classes.append([str(entry.get("class", "")), str(entry.get("path", ""))])
	var paths := []
	for entry in _classes:
		if entry[0] != "" and has_word(source, entry[0], true):
			paths.append(entry[1])
	return paths


# The code with no space or tab beside a ".", "(" or ")" (GDScript's tokens hold none of them there).
static func _squeezed(code: String) -> String:
	var out := ""
	for i in range(code.length()):
		var c := code[i]
		if c == " " or c == "\t":
			var before := out[out.length() - 1] if out.length() > 0 else ""
			var j := i + 1
			while j < code.length() and code[j] in " \t":
				j += 1
			var after := code[j] if j < code.length() else ""
			if before in [".", "(", ")"] or after in [".", "(", ")"]:
				continue
		out += c
	return out


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
