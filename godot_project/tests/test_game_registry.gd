extends "res://tests/test_case.gd"
# The game registry: this project's setting, --list_envs, --env and the default game, and the
# one-game fallback of a project without the setting.

const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")
const Sync = preload("res://addons/rl_sync/sync.gd")

const BALL_CHASE := "res://games/ball_chase/ball_chase.tscn"
const TWO_GAMES := {"snake": "res://snake.tscn", "ball_chase": BALL_CHASE}

var _saved_settings := {}


func cleanup() -> void:
	# Put back any setting a test removed.
	for key in _saved_settings:
		ProjectSettings.set_setting(key, _saved_settings[key])


func _remove_setting(key: String) -> void:
	if ProjectSettings.has_setting(key):
		_saved_settings[key] = ProjectSettings.get_setting(key)
		# Setting null erases a project setting.
		ProjectSettings.set_setting(key, null)


func test_this_project_registers_ball_chase() -> void:
	check(GameRegistry.has_registry(), "project.godot has rl_sync/games")
	check_eq(GameRegistry.settings_problem(), "", "the project's settings are usable")
	var all_games := GameRegistry.games()
	check_eq(all_games.get("ball_chase"), BALL_CHASE, "ball_chase is registered")
	check_eq(all_games.get("jumper"), "res://games/jumper/jumper.tscn", "jumper is registered")
	for name in ["memory", "sparse_goal"]:
		check_eq(all_games.get(name), "res://games/%s/%s.tscn" % [name, name], name + " is registered")
	check_eq(all_games.get("cart_pole"), "res://games/cart_pole/cart_pole.tscn", "cart_pole's scene")
	check_eq(GameRegistry.default_game(all_games), "ball_chase", "default game")
	check_eq(ProjectSettings.get_setting(GameRegistry.MAIN_SCENE_SETTING), "res://addons/rl_sync/game_selector.tscn",
			"the addon's selector is the main scene")


func test_list_line_is_one_json_object_with_envs_first() -> void:
	var line := GameRegistry.list_line({"ball_chase": BALL_CHASE}, "ball_chase")
	check_eq(line, "{\"envs\": [\"ball_chase\"], \"default\": \"ball_chase\"}", "--list_envs line")
	line = GameRegistry.list_line(TWO_GAMES, "snake")
	check_eq(line, "{\"envs\": [\"ball_chase\", \"snake\"], \"default\": \"snake\"}", "sorted names")
	check(line.begins_with("{\"envs\"") and not "\n" in line, "one line starting with {\"envs\"")
	var parsed := JSON.parse(line)
	check_eq(parsed.error, OK, "the line parses as JSON")
	check_eq(parsed.result, {"envs": ["ball_chase", "snake"], "default": "snake"}, "parsed line")


func test_decide_answers_the_command_line() -> void:
	check_eq(GameRegistry.decide({"list_envs": "true", "env": "snake"}, true, TWO_GAMES, "ball_chase"),
			{"print": GameRegistry.list_line(TWO_GAMES, "ball_chase"), "exit": 0}, "--list_envs wins")
	check_eq(GameRegistry.decide({"env": "snake"}, false, TWO_GAMES, "ball_chase"), {"game": "snake"},
			"--env names the game")
	check_eq(GameRegistry.decide({"env": "nope", "port": "5"}, true, TWO_GAMES, "ball_chase"),
			{"error": "unknown game 'nope' (--env): valid names are ball_chase, snake"}, "an unknown --env")
	var default_choice := {"game": "ball_chase",
			"print": "rl_sync: no --env given: running the default game 'ball_chase' (--list_envs lists the games)"}
	for args in [{"port": "5", "env_seed": "1"}, {"benchmark_steps": "10"}, {"policy": "p.json"}, {"headless": "true"}]:
		check_eq(GameRegistry.decide(args, false, TWO_GAMES, "ball_chase"), default_choice,
				"%s without --env runs the default" % to_json(args))
	check_eq(GameRegistry.decide({}, true, TWO_GAMES, "ball_chase"), default_choice, "headless without --env")
	check_eq(GameRegistry.decide({"env": "true"}, true, TWO_GAMES, "ball_chase"), default_choice,
			"a bare --env names no game")
	check_eq(GameRegistry.decide({"agents": "4"}, false, TWO_GAMES, "ball_chase"), {},
			"a window without --env: menu or this scene")
	check_eq(GameRegistry.decide({"port": "5"}, true, {"ball_chase": BALL_CHASE}, "ball_chase"),
			{"game": "ball_chase"}, "a project of one game runs it without a word")


func test_default_is_named_or_first() -> void:
	check_eq(GameRegistry.pick_default(TWO_GAMES, "snake"), "snake", "the named default")
	check_eq(GameRegistry.pick_default(TWO_GAMES, ""), "ball_chase", "no default named: the first sorted name")
	check_eq(GameRegistry.pick_default({"solo": "res://solo.tscn"}, "ball_chase"), "solo", "a default that is no game")


func test_bad_settings_are_explained() -> void:
	var cases := [
		[[], "", "must be a Dictionary of game names to scenes"],
		[{}, "", "must be a Dictionary of game names to scenes"],
		[{"a": 3}, "", "must map names to scene paths"],
		[{"a": "res://nowhere.tscn"}, "", "the scene res://nowhere.tscn of the game 'a' does not exist"],
		[{"ball_chase": BALL_CHASE}, "snake",
				"rl_sync/default_game is 'snake', which is not a game of rl_sync/games (ball_chase)"],
	]
	for case in cases:
		var problem := GameRegistry.registry_problem(case[0], case[1])
		check(case[2] in problem, "%s: expected a problem containing '%s', got '%s'"
				% [to_json(case[0]), case[2], problem])
	check_eq(GameRegistry.registry_problem({"ball_chase": BALL_CHASE}, ""), "", "no default named is fine")


func test_a_scene_is_named_by_its_rlsync_node() -> void:
	check_eq(GameRegistry.scene_game_name(BALL_CHASE), "ball_chase", "ball_chase.tscn's RLSync env_name")
	check_eq(GameRegistry.scene_game_name("res://addons/rl_sync/game_selector.tscn"), "game_selector",
			"a scene without RLSync: its file name")
	check_eq(GameRegistry.packed_game_name(_pack_game("")), "", "an RLSync node with an empty env_name")
	check_eq(GameRegistry.packed_game_name(_pack_game("mine")), "mine", "an RLSync node's env_name")
	# An RLSync node inside an instanced sub-scene counts too.
	var outer := Node.new()
	var inner: Node = load(BALL_CHASE).instance()
	outer.add_child(inner)
	inner.owner = outer
	var packed := PackedScene.new()
	packed.pack(outer)
	outer.free()
	check_eq(GameRegistry.packed_game_name(packed), "ball_chase", "RLSync in an instanced sub-scene")


func _pack_game(env_name: String) -> PackedScene:
	var root := Node2D.new()
	var sync = Sync.new()
	sync.env_name = env_name
	root.add_child(sync)
	sync.owner = root
	var packed := PackedScene.new()
	packed.pack(root)
	root.free()
	return packed


func test_without_the_setting_the_project_has_one_game() -> void:
	_remove_setting(GameRegistry.GAMES_SETTING)
	_remove_setting(GameRegistry.DEFAULT_SETTING)
	check(not GameRegistry.has_registry(), "the setting is gone for this test")
	check_eq(GameRegistry.settings_problem(), "", "no setting is not a problem")
	var solo := {"solo": "res://solo.tscn"}
	check_eq(GameRegistry.games(solo), solo, "the running scene's game, as RLSync passes it")
	check_eq(GameRegistry.default_game(solo), "solo", "its one game is the default")
	check_eq(GameRegistry.list_line(solo, GameRegistry.default_game(solo)),
			"{\"envs\": [\"solo\"], \"default\": \"solo\"}", "--list_envs of a one-game project")
	# Without a running game: the main scene, named like any scene.
	check_eq(GameRegistry.games(), {"game_selector": "res://addons/rl_sync/game_selector.tscn"}, "the main scene")
