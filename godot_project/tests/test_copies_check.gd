extends "res://tests/test_case.gd"
# copies_check.gd on sources given as text, and rl_args.gd's settings of the copy being built.

const CopiesCheck = preload("res://addons/rl_sync/copies_check.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")


func _found(source: String) -> Array:
	return CopiesCheck.new().scan("res://game.gd", source)


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
	var found := _found(source)
	var lines := []
	for line in found:
		lines.append(int(line.split(":")[2]))
	check_eq(lines, [3, 4, 5, 6, 7, 8, 9, 10, 11], "one finding per line, each with its line number: " + str(found))
	check("global random generator" in found[0], found[0])
	check("tree-wide group call" in found[2], found[2])
	check("pause" in found[4], found[4])
	check(not CopiesCheck.REFUSED in PoolStringArray(found.slice(0, 7)).join(" "), "only the input refuses")
	check(CopiesCheck.REFUSED in found[8] and "Input singleton" in found[8], found[8])


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
