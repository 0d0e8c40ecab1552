extends Node2D
# BallChase: in each walled arena an agent chases fruit that respawns at random places.
#
# One instance simulates --agents independent arenas (default 16 when training, 1 for human play),
# laid out in a grid that the window scales to fit. Arenas sit far enough apart that no ray or body
# of one can reach another.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Arena = preload("res://games/ball_chase/arena.tscn")

const ARENA_PITCH := 480.0
const TRAINING_AGENTS := 16
const HUMAN_AGENTS := 1

var arenas := []


func _ready() -> void:
	var default_agents := TRAINING_AGENTS if RlArgs.has("port") or RlArgs.has("benchmark_steps") else HUMAN_AGENTS
	var n_agents = RlArgs.get_int(get_tree(), "agents", default_agents, 1)
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	var columns := int(ceil(sqrt(n_agents)))
	for i in range(n_agents):
		var arena = Arena.instance()
		arena.index = i
		arena.seed_value = seed_value
		arena.position = Vector2(i % columns, i / columns) * ARENA_PITCH
		add_child(arena)
		arenas.append(arena)
	get_viewport().connect("size_changed", self, "_fit_to_window")
	_fit_to_window()


func _fit_to_window() -> void:
	if arenas.empty():
		return
	var columns := int(ceil(sqrt(arenas.size())))
	var rows := int(ceil(arenas.size() / float(columns)))
	# The top strip is left to the overlay's text; the grid is centred in the rest.
	var top := 80.0
	var area := get_viewport_rect().size - Vector2(20, top + 10)
	var grid := Vector2(columns, rows) * ARENA_PITCH
	var scale_factor := min(area.x / grid.x, area.y / grid.y)
	scale = Vector2.ONE * scale_factor
	# Each arena's walls reach 20 px outside its origin; centre the grid's drawn extent.
	position = Vector2((get_viewport_rect().size.x - grid.x * scale_factor) / 2.0, top) + Vector2(40, 20) * scale_factor
