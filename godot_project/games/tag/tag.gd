extends "res://addons/rl_sync/arena_grid.gd"
# Tag: in each field a chaser tries to touch a runner; two policies with different observations and
# actions ("chaser" and "runner"), trained side by side as two networks.
#
# --agents counts agents, as the trainer does: each field holds a chaser and a runner, so --agents=16
# builds 8 fields, and an odd count gets one more agent.

const AGENTS_PER_FIELD := 2


func _init() -> void:
	arena_scene = preload("res://games/tag/field.tscn")
	pitch = Vector2(380, 380)
	drawn_rect = Rect2(-10, -10, 320, 320)


# Before the grid's _ready (which builds n_agents arenas): the agents asked for, as fields.
func _enter_tree() -> void:
	var agents = requested_agents(get_tree(), n_agents * AGENTS_PER_FIELD if n_agents > 0 else 0)
	if agents != null:
		n_agents = int(ceil(agents / float(AGENTS_PER_FIELD)))
