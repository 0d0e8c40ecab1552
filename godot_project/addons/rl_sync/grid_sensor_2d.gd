extends Node2D
# GridSensor2D: how many nodes of each listed group lie in each cell of a grid around the agent (as
# ML-Agents' GridSensor and godot_rl_agents' GridSensor2D), for any 2D game. A child of the agent's
# body.
#
# The grid is `grid_width` x `grid_height` cells of `cell_size` world units, centred on this node
# (an odd size puts the agent in the middle of the middle cell), its rows along +y, axis-aligned or
# turned with the agent (`rotate_with_agent`). A node counts in the cell its global_position falls in.
# get_observation() returns group by group, row by row (top row first), each row from left to right:
# groups x cells values (observation_size()), a cell's count of that group's nodes, or
# min(count, max_count) / max_count with a max_count (1: presence, 0 or 1). The groups' nodes are
# looked up only when an observation is asked for (300 nodes of two groups: about 0.3 ms).
# Only Node2Ds of this node's viewport are counted (each copy of --copies has its own), never this
# node or the body it is on (group_nodes.gd, the core it shares with the 3D grid and the nearest nodes).

export(Array, String) var groups := []
export var grid_width := 5
export var grid_height := 5
export var cell_size := Vector2(64, 64)
# Cells in the agent's frame (they turn with it) rather than the world's axes.
export var rotate_with_agent := false
# 0: raw counts; k > 0: min(count, k) / k, so 1 reads as presence.
export var max_count := 0
# Draws the grid in windowed runs; costs nothing headless.
export var debug_draw := true

const GroupNodes = preload("res://addons/rl_sync/group_nodes.gd")

var _last_values := []


func _ready() -> void:
	# Drawing is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"


func observation_size() -> int:
	return groups.size() * grid_width * grid_height


func get_observation() -> Array:
	var values := GroupNodes.count_cells(self, groups, _to_grid(), grid_width, grid_height, true)
	GroupNodes.cap(values, max_count)
	if debug_draw:
		_last_values = values.duplicate()
		update()
	return values


# The transform from global positions to grid units.
func _to_grid() -> Transform2D:
	var frame := global_transform
	if not rotate_with_agent:
		var scale := frame.get_scale()
		frame = Transform2D(Vector2(scale.x, 0), Vector2(0, scale.y), frame.origin)
	var corner := Vector2(grid_width, grid_height) * 0.5
	var cells := Transform2D(Vector2(1.0 / cell_size.x, 0), Vector2(0, 1.0 / cell_size.y), corner)
	return cells * frame.affine_inverse()


func _draw() -> void:
	if _last_values.empty():
		return
	# The drawing is in this node's frame: undo the rotation when the grid does not turn.
	if not rotate_with_agent:
		draw_set_transform(Vector2.ZERO, -global_rotation, Vector2.ONE)
	var cells := grid_width * grid_height
	var origin := -Vector2(grid_width, grid_height) * 0.5 * cell_size
	for c in range(cells):
		var rect := Rect2(origin + Vector2(c % grid_width, c / grid_width) * cell_size, cell_size)
		var filled := 0.0
		for g in range(groups.size()):
			filled = max(filled, _last_values[g * cells + c])
		draw_rect(rect, Color(0.3, 0.8, 1.0, 0.25 * min(filled, 1.0)), true)
		draw_rect(rect, Color(1, 1, 1, 0.1), false)
