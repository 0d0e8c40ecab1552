extends Node
# Entry scene: picks the game named by --env, or shows a menu of the games in a window.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

# Game name -> scene. python_trainer/paths.py keeps the same list of names.
const GAMES := {
	"ball_chase": "res://games/ball_chase/ball_chase.tscn",
}


func _ready() -> void:
	if RlArgs.has("list_envs"):
		print(to_json(GAMES.keys()))
		get_tree().quit(0)
		return
	var env := RlArgs.get_string("env", "")
	if env == "true":
		env = ""
	if env != "":
		if not GAMES.has(env):
			RlArgs.fail(get_tree(), "unknown game '%s' (--env): valid names are %s" % [env, _names()])
			return
		add_child(load(GAMES[env]).instance())
	elif RlArgs.has("port") or RlArgs.is_headless():
		RlArgs.fail(get_tree(), "no game given: pass --env=NAME, one of %s" % _names())
	else:
		_show_menu()


func _names() -> String:
	var names: Array = GAMES.keys()
	names.sort()
	return PoolStringArray(names).join(", ")


# A window opened without --env lets a person pick a game and play it with the keyboard.
func _show_menu() -> void:
	var menu := CenterContainer.new()
	menu.set_anchors_and_margins_preset(Control.PRESET_WIDE)
	var box := VBoxContainer.new()
	menu.add_child(box)
	var title := Label.new()
	title.text = "RL Games: pick a game, then move with the arrow keys or WASD"
	box.add_child(title)
	var names: Array = GAMES.keys()
	names.sort()
	for name in names:
		var button := Button.new()
		button.text = name
		button.connect("pressed", self, "_start_game", [name, menu])
		box.add_child(button)
	add_child(menu)


func _start_game(name: String, menu: Node) -> void:
	menu.queue_free()
	add_child(load(GAMES[name]).instance())
