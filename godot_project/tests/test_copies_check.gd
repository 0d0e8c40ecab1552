extends "res://tests/test_case.gd"
# copies_check.gd on sources given as text, and rl_args.gd's settings of the copy being built.

const CopiesCheck = preload("res://addons/rl_sync/copies_check.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const InputWatch = preload("res://addons/rl_sync/input_watch.gd")


# The lines of the findings in `source`; `refusing` gets whether each refuses copies.
func _found(source: String, refusing := []) -> Array:
	var found := CopiesCheck.new().scan("res://game.gd", source)
	for one in found:
		refusing.append(one["refuses"])
	return CopiesCheck.lines_of(found)


func test_each_shared_thing_is_named_with_its_line() -> void:
	var source := PoolStringArray([
		"extends Node2D",
		"func _ready():",
		"	randomize()",
		"	var x = randi() % 3 + rand_range(0, 1)",
		"	get_tree().call_group(\"mobs\", \"queue_free\")",
		"	for mob in get_tree().get_nodes_in_group(\"mobs\"): pass",
		"	get_tree().paused = true",
		"	var size = get_tree().root.size",
		"	get_tree().change_scene(\"res://title.tscn\")",
		"	var args = OS.get_cmdline_args()",
		"	Input.action_press(\"move_left\")",
	]).join("\n")
	var refusing := []
	var found := _found(source, refusing)
	var lines := []
	for line in found:
		lines.append(int(line.split(":")[2]))
	check_eq(lines, [3, 4, 5, 6, 7, 8, 9, 10, 11], "one finding per line, each with its line number: " + str(found))
	check("global random generator" in found[0], found[0])
	check("tree-wide group call" in found[2], found[2])
	check("pause" in found[4], found[4])
	check_eq(refusing, [false, false, false, false, false, false, false, false, true], "only the input refuses")
	check(found[8].ends_with(": REFUSED: copies share one Input singleton, so every copy's agent would press the same "
			+ "actions: give each agent its actions through its controller's set_action, or run with --copies 1"), found[8])
	check_eq(CopiesCheck.refusal(CopiesCheck.new().scan("res://game.gd", source)), found[8], "the refusal is its line")
	check_eq(CopiesCheck.refusal(CopiesCheck.new().scan("res://game.gd", "randomize()")), "", "nothing refuses")


func test_comments_strings_and_own_generators_are_not_findings() -> void:
	var source := PoolStringArray([
		"var rng := RandomNumberGenerator.new()",
		"# randomize() here would seed the global generator",
		"func f():",
		"	rng.randomize()",
		"	var a = rng.randi() + rng.randf_range(0, 1)",
		"	rng.seed = 5",
		"	print(\"call_group( and paused are words in a string\")  # Input.action_press(",
		"	var unpaused_time := 0",
		"	var my_randi_count = 0",
	]).join("\n")
	check_eq(_found(source), [], "nothing shared")


func test_a_copy_reads_its_own_seed_while_it_is_built() -> void:
	var before := RlArgs.get_string("env_seed", "none")
	RlArgs.set_override({"env_seed": "42"})
	check_eq(RlArgs.get_string("env_seed", "none"), "42", "the copy's --env_seed")
	check_eq(RlArgs.get_int(tree, "env_seed", 0, 0), 42, "as an integer too")
	RlArgs.set_override({})
	check_eq(RlArgs.get_string("env_seed", "none"), before, "the command line's again")


func test_spaces_tabs_and_dots_hide_no_word() -> void:
	var source := PoolStringArray([
		"	Input.action_press (\"move_left\")",
		"	Input .action_release	(\"x\")",
		"	Input. parse_input_event ( ev )",
		"	Input\t.\taction_press(\t'jump')",
		"	var r = get_tree ().get_root ().size",
		"	get_tree() . set_pause (true)",
		"	var a = rng . randi () + rng.randf ()",
		"	if Input.is_action_pressed (\"x\") or Input . is_action_just_pressed ('y'): pass",
	]).join("\n")
	var refusing := []
	var found := _found(source, refusing)
	var lines := []
	for line in found:
		lines.append(int(line.split(":")[2]))
	check_eq(lines, [1, 2, 3, 4, 5, 6], "each spaced call is found, a generator's own and Input's reads are not: " + str(found))
	check_eq(refusing, [true, true, true, true, false, false], "the four presses refuse copies")
	for k in range(4):
		check("Input singleton" in found[k], found[k])
	check("root viewport" in found[4], found[4])
	check("pause" in found[5], found[5])


func test_what_a_script_loads_is_read_with_either_quotes_and_relative_paths() -> void:
	var source := PoolStringArray([
		"const Helper = preload('res://helper.gd')",
		"var scene = load ( \"res://scenes/a.tscn\" )",
		"var other = ResourceLoader.load('sub/b.gd')",
		"const Up = preload	(\"../c.gd\")",
		"func f(): reload(\"res://no.gd\"); download('res://no2.gd'); load(\"res://icon.png\")",
	]).join("\n")
	check_eq(CopiesCheck.loaded_paths(source, "res://games/x/agent.gd"),
			["res://helper.gd", "res://scenes/a.tscn", "res://games/x/sub/b.gd", "res://games/c.gd"],
			"every script or scene it loads, none it does not")


# input_watch.gd in the tree, as scene_copies.gd adds it, but saying its problem instead of ending the runner.
func _watch() -> Node:
	var watch = InputWatch.new(3)
	watch.fails_at_once = false
	tree.root.add_child(watch)
	return watch


func _end_watch(watch: Node) -> void:
	watch.queue_free()
	if Engine.has_meta(InputWatch.PROBLEM_META):
		Engine.remove_meta(InputWatch.PROBLEM_META)


func test_the_watch_names_an_action_pressed_through_input_in_one_line() -> void:
	var watch := _watch()
	yield(physics_frames(3), "completed")
	check_eq(InputWatch.problem(), "", "nothing pressed, nothing said")
	Input.call("action_" + "press", "ui_left")  # no reading of the source finds this one
	yield(physics_frames(2), "completed")
	Input.action_release("ui_left")
	var line := InputWatch.problem()
	check(line.begins_with("--copies=3: ") and "\"ui_left\"" in line and "Input singleton" in line, line)
	check("set_action" in line and "--copies 1" in line and not "\n" in line, line)
	_end_watch(watch)


func test_the_watch_sees_a_press_released_within_the_frame_and_a_parsed_event() -> void:
	yield(physics_frames(2), "completed")  # past the frame of an earlier test's release
	var watch := _watch()
	Input.action_press("ui_up")
	Input.action_release("ui_up")
	yield(physics_frames(2), "completed")
	check("\"ui_up\" (released)" in InputWatch.problem(), InputWatch.problem())
	_end_watch(watch)
	watch = _watch()
	var event := InputEventAction.new()
	event.action = "ui_right"
	event.pressed = true
	Input.parse_input_event(event)
	event.pressed = false
	Input.parse_input_event(event)
	check("\"ui_right\" (an InputEventAction)" in InputWatch.problem(), InputWatch.problem())
	_end_watch(watch)
