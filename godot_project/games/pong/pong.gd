extends "res://addons/rl_sync/arena_grid.gd"
# Pong: two paddles and one ball per court, many courts side by side.
#
# --agents counts paddles, the trainer's agents: each court seats two, so --agents=16 builds 8 courts
# and an odd count gets one more paddle. The addon's arena grid lays the courts out and fits them to
# the window through the canvas transform (every simulating value stays in court units).

const PADDLES_PER_COURT := 2


func _init() -> void:
	arena_scene = preload("res://games/pong/court.tscn")
	pitch = Vector2(560, 400)
	drawn_rect = Rect2(-12, -12, 504, 344)


# Before the grid's _ready (which builds n_agents arenas): the paddles asked for, as courts.
func _enter_tree() -> void:
	var paddles = requested_agents(get_tree(), n_agents * PADDLES_PER_COURT if n_agents > 0 else 0)
	if paddles != null:
		n_agents = int(ceil(paddles / float(PADDLES_PER_COURT)))
