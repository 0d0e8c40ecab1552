extends Node
# The main scene of a project with several games: runs the game named by --env (or the default one
# when a trainer, a benchmark or a policy starts the binary without --env, or headless), answers
# --list_envs, and in a window opened without any of these shows a menu of the games.
# The games are listed in the project setting rl_sync/games (see game_registry.gd).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const GameRegistry = preload("res://addons/rl_sync/game_registry.gd")


func _ready() -> void:
	if not GameRegistry.has_registry():
		# Without the setting the project's one game is its main scene, which this scene is not.
		RlArgs.fail(get_tree(), ("game_selector.tscn is the main scene, but the project setting %s does not list "
				+ "any games: add it to project.godot (see addons/rl_sync/README.md), or make your game's "
				+ "scene the main scene") % GameRegistry.GAMES_SETTING)
		return
	if GameRegistry.claim_run(get_tree()):
		_show_menu()


func _show_menu() -> void:
	var menu := CenterContainer.new()
	menu.set_anchors_and_margins_preset(Control.PRESET_WIDE)
	var box := VBoxContainer.new()
	menu.add_child(box)
	var label := Label.new()
	var project_name = ProjectSettings.get_setting("application/config/name")
	label.text = "%s: pick a game, then play it with the keyboard" % project_name
	box.add_child(label)
	var all_games := GameRegistry.games()
	for name in GameRegistry.sorted_names(all_games):
		var button := Button.new()
		button.text = name
		button.connect("pressed", self, "_start_game", [name, all_games])
		box.add_child(button)
	add_child(menu)


func _start_game(name: String, all_games: Dictionary) -> void:
	GameRegistry.switch_to(get_tree(), name, all_games)
