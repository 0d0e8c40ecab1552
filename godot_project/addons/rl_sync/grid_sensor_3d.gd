extends Spatial
# GridSensor3D: how many nodes of each listed group lie in each cell of a grid on the ground around
# the agent (the 3D sibling of grid_sensor_2d.gd), for any 3D game. A child of the agent's body.
#
# The grid is `grid_width` cells along x by `grid_depth` along z, each `cell_size` (x, z) world units,
# centred on this node, on the world's axes or turned with the agent's yaw (`rotate_with_agent`); with
# `height` > 0 only nodes at most that far above or below count. get_observation() returns group by
# group, row by row from the front (-z), each row from left (-x) to right: groups x cells values
# (observation_size()), a cell's count, or min(count, max_count) / max_count with a max_count (1:
# presence). Only Spatials of this node's viewport are counted, never this node or the body it is on
# (group_nodes.gd, the core it shares with the 2D grid and the nearest nodes).

const GroupNodes = preload("res://addons/rl_sync/group_nodes.gd")

export(Array, String) var groups := []
export var grid_width := 5
export var grid_depth := 5
export var cell_size := Vector2(2, 2)
# World units above and below this node that count; 0: any height.
export var height := 0.0
# Cells turned with the agent's yaw rather than on the world's axes.
export var rotate_with_agent := false
# 0: raw counts; k > 0: min(count, k) / k, so 1 reads as presence.
export var max_count := 0


func observation_size() -> int:
	return groups.size() * grid_width * grid_depth


func get_observation() -> Array:
	var values := GroupNodes.count_cells(self, groups, _to_grid(), grid_width, grid_depth, false, height)
	GroupNodes.cap(values, max_count)
	return values


# The transform from global positions to grid units in x and z (one cell is 1 x 1, the grid's corner
# at 0); y stays in world units, measured from this node.
func _to_grid() -> Transform:
	var basis := global_transform.basis
	var yaw := basis.get_euler().y if rotate_with_agent else 0.0
	var frame := Transform(Basis(Vector3.UP, yaw).scaled(basis.get_scale()), global_transform.origin)
	var cells := Transform(Basis(Vector3(1.0 / cell_size.x, 0, 0), Vector3.UP, Vector3(0, 0, 1.0 / cell_size.y)),
			Vector3(grid_width, 0, grid_depth) * 0.5)
	return cells * frame.affine_inverse()
