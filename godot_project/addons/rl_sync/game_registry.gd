extends Reference
# Which games a project holds, and which one a run plays (static functions only).
#
# A project with several games lists them in project.godot and uses game_selector.tscn as its main
# scene:
#   [rl_sync]
#   games={"my_game": "res://my_game/my_game.tscn", "other": "res://other/other.tscn"}
#   default_game="my_game"
# A project without that setting has one game: its main scene, named by the env_name of its RLSync
# node (or by the scene file's base name when env_name is empty).
#
# The first scene of a run (the game selector, or a game scene whose RLSync node runs first) calls
# claim_run(), which answers --list_envs and --env and starts the chosen game.

const Contract = preload("res://addons/rl_sync/contract.gd")
const ErrorWatch = preload("res://addons/rl_sync/error_watch.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const EnvParams = preload("res://addons/rl_sync/env_params.gd")
const Result = preload("res://addons/rl_sync/result.gd")

const GAMES_SETTING := "rl_sync/games"
const DEFAULT_SETTING := "rl_sync/default_game"
const MAIN_SCENE_SETTING := "application/run/main_scene"
# Compared by path, not preloaded: sync.gd preloads this file, and preloads must not form a cycle.
const SYNC_SCRIPT_PATH := "res://addons/rl_sync/sync.gd"
# Engine metadata naming the game chosen for this run: the chosen scene's RLSync node reads it
# instead of choosing again.
const CHOSEN_META := "rl_sync_game"


static func has_registry() -> bool:
	return ProjectSettings.has_setting(GAMES_SETTING)


# Game name -> scene path. Without the setting: `single_game` when given (RLSync passes the scene it
# runs in), else the main scene under its game name.
static func games(single_game: Dictionary = {}) -> Dictionary:
	if has_registry():
		var registered = ProjectSettings.get_setting(GAMES_SETTING)
		return registered if typeof(registered) == TYPE_DICTIONARY else {}
	if not single_game.empty():
		return single_game
	var main_scene := str(ProjectSettings.get_setting(MAIN_SCENE_SETTING))
	return {scene_game_name(main_scene): main_scene}


static func default_game(all_games: Dictionary) -> String:
	return pick_default(all_games, str(_default_setting()))


# The named default, or the first name in sorted order when the project names none of its games
# (a default_game without the games setting names nothing).
static func pick_default(all_games: Dictionary, default_name: String) -> String:
	if all_games.has(default_name):
		return default_name
	var names := sorted_names(all_games)
	return names[0] if not names.empty() else ""


static func sorted_names(all_games: Dictionary) -> Array:
	var names: Array = all_games.keys()
	names.sort()
	return names


# "" when the project's rl_sync settings are usable, else one sentence saying what is wrong.
static func settings_problem() -> String:
	if not has_registry():
		return ""
	return registry_problem(ProjectSettings.get_setting(GAMES_SETTING), _default_setting())


static func _default_setting():
	return ProjectSettings.get_setting(DEFAULT_SETTING) if ProjectSettings.has_setting(DEFAULT_SETTING) else ""


static func registry_problem(registered, default_name) -> String:
	var example := "{\"my_game\": \"res://my_game.tscn\"}"
	if typeof(registered) != TYPE_DICTIONARY or registered.empty():
		return "the project setting %s must be a Dictionary of game names to scenes, e.g. %s" % [GAMES_SETTING, example]
	for name in registered:
		var scene = registered[name]
		if typeof(name) != TYPE_STRING or name == "" or typeof(scene) != TYPE_STRING:
			return "the project setting %s must map names to scene paths, e.g. %s; it holds %s" % [
					GAMES_SETTING, example, to_json(registered)]
		if not ResourceLoader.exists(scene):
			return "the project setting %s: the scene %s of the game '%s' does not exist" % [GAMES_SETTING, scene, name]
	if typeof(default_name) != TYPE_STRING or (default_name != "" and not registered.has(default_name)):
		return "the project setting %s is '%s', which is not a game of %s (%s)" % [
				DEFAULT_SETTING, str(default_name), GAMES_SETTING, names_text(registered)]
	return ""


static func names_text(all_games: Dictionary) -> String:
	return PoolStringArray(sorted_names(all_games)).join(", ")


# The one stdout line of --list_envs, keys in this order (to_json would sort them):
#   {"envs": ["a", "b"], "default": "a"}
# and, when games declare environment parameters (our extension, see env_params_of()), after them:
#   , "env_params": {"a": {"gap": {"default": 1.0, "max": 2.0, "min": 0.5}}}
static func list_line(all_games: Dictionary, default_name: String, params: Dictionary = {}) -> String:
	var quoted := PoolStringArray()
	for name in sorted_names(all_games):
		quoted.append(to_json(name))
	var line := "{\"%s\": [%s], \"%s\": %s" % [Contract.ENVS_REPORT, quoted.join(", "), Contract.ENVS_DEFAULT_KEY, to_json(default_name)]
	return line + (", \"%s\": %s}" % [Contract.ENVS_PARAMS_KEY, to_json(params)] if not params.empty() else "}")


# Each game's environment parameters (env_params.gd), read from its scene instanced but never run:
# a Result, GO_ON with game -> declared for the games that declare some, or FAILED when a declaration is wrong.
static func env_params_of(all_games: Dictionary) -> Reference:
	var found := {}
	for name in sorted_names(all_games):
		var scene = all_games[name]
		if not ResourceLoader.exists(scene):
			continue
		var packed = load(scene)
		if not packed is PackedScene:
			continue
		var root: Node = packed.instance()
		var declared: Result = EnvParams.declared_in(root)
		root.free()
		if declared.is_failure():
			return Result.failed("game '%s': %s" % [name, declared.message])
		if not declared.value.empty():
			found[name] = declared.value
	return Result.go_on(found)


# A scene's game name: the env_name of its RLSync node, else the scene file's base name.
static func scene_game_name(scene_path: String) -> String:
	var name := ""
	if scene_path != "" and ResourceLoader.exists(scene_path):
		var packed = load(scene_path)
		if packed is PackedScene:
			name = packed_game_name(packed)
	return name if name != "" else scene_path.get_file().get_basename()


# The env_name of the packed scene's RLSync node ("" when it has none or leaves it empty). Instancing
# outside the tree runs no _ready, and it sees nodes of instanced sub-scenes and their overrides.
static func packed_game_name(packed: PackedScene) -> String:
	var root := packed.instance()
	var sync = _find_sync(root)
	var name: String = sync.env_name if sync != null else ""
	root.free()
	return name


static func _find_sync(node: Node):
	if _is_sync_script(node.get_script()):
		return node
	for child in node.get_children():
		var found = _find_sync(child)
		if found != null:
			return found
	return null


static func _is_sync_script(script) -> bool:
	while script != null:
		if script.resource_path == SYNC_SCRIPT_PATH:
			return true
		script = script.get_base_script()
	return false


# What the first scene of a run does, decided from the command line alone:
#   {"print": LINE, "exit": 0}      --list_envs
#   {"error": MESSAGE}              an unknown --env
#   {"game": NAME[, "print": LINE]} run that game (LINE says that it is the default)
#   {}                              nothing asked: a window shows the selector's menu, or a game scene
#                                   plays itself
# `unattended` is true for headless runs; so are --port (a trainer), --benchmark_steps and --policy.
static func decide(args: Dictionary, unattended: bool, all_games: Dictionary, default_name: String) -> Dictionary:
	if args.has("list_envs"):
		var params: Result = env_params_of(all_games)
		if params.is_failure():
			return {"error": params.message}
		return {"print": list_line(all_games, default_name, params.value), "exit": 0}
	var env: String = args.get("env", "")
	# A bare --env reads as "true"; it names no game.
	if env != "" and env != "true":
		if not all_games.has(env):
			return {"error": "unknown game '%s' (--env): valid names are %s" % [env, names_text(all_games)]}
		return {"game": env}
	for key in ["port", "benchmark_steps", "policy", "headless"]:
		unattended = unattended or args.has(key)
	if not unattended:
		return {}
	if all_games.size() == 1:  # a project of one game: there is nothing else --env could have chosen
		return {"game": default_name}
	return {"game": default_name, "print": default_line(default_name)}


static func default_line(default_name: String) -> String:
	return "rl_sync: no --env given: running the default game '%s' (--list_envs lists the games)" % default_name


# Called once by the first scene of a run. Returns true when the calling scene goes on: it is the
# chosen game, or nothing was asked (a window). Returns false when the run goes elsewhere: to another
# scene, or to an exit after --list_envs or an error; the caller must then start nothing.
static func claim_run(tree: SceneTree, single_game: Dictionary = {}) -> bool:
	if RlArgs.has_failed() or ErrorWatch.watch_in_child(tree):  # the watcher quits when its child does
		return false
	var problem := settings_problem()
	if problem != "":
		RlArgs.fail(tree, problem)
		return false
	var all_games := games(single_game)
	var choice := decide(RlArgs.parse(), RlArgs.is_headless(), all_games, default_game(all_games))
	if choice.has("error"):
		RlArgs.fail(tree, choice["error"])
		return false
	if choice.has("print"):
		print(choice["print"])
	if choice.has("exit"):
		tree.quit(choice["exit"])
		return false
	if not choice.has("game"):
		return true
	return not switch_to(tree, choice["game"], all_games)


# Marks the game as chosen and loads its scene unless it is running already. Returns true when the
# tree is switching scenes (or failing), so the current scene must start nothing.
static func switch_to(tree: SceneTree, name: String, all_games: Dictionary) -> bool:
	Engine.set_meta(CHOSEN_META, name)
	var scene: String = all_games[name]
	if tree.current_scene != null and tree.current_scene.filename == scene:
		return false
	if tree.change_scene(scene) != OK:
		RlArgs.fail(tree, "cannot load the scene %s of the game '%s'" % [scene, name])
	return true


# The game chosen for this run, or "" when no scene has chosen one.
static func chosen_game() -> String:
	return str(Engine.get_meta(CHOSEN_META)) if Engine.has_meta(CHOSEN_META) else ""
