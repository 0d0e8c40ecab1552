extends Reference
# The core the sensors of a group's nodes share (grid_sensor_2d.gd, grid_sensor_3d.gd,
# nearest_nodes_2d.gd, nearest_nodes_3d.gd): walking a group's nodes as the sensor sees them, in 2D
# (`flat`: Node2Ds, global_position) or 3D (Spatials, global_transform.origin).
#
# A sensor sees the nodes of its own viewport only (each copy of --copies has its own, though the copies
# share the tree's groups), never itself or the body it is on. The cheap bounds are tested first, the
# viewport last, so a few hundred nodes cost a fraction of a millisecond.


static func position_of(node: Node, flat: bool):
	return node.global_position if flat else node.global_transform.origin


static func seen_by(node: Node, sensor: Node, viewport: Viewport) -> bool:
	return node != sensor and node != sensor.get_parent() and node.get_viewport() == viewport


# Counts of each group's nodes in the cells of a width x height grid: group by group, row by row, each
# row from its first column. `to_grid` takes a global position to grid units (one cell is 1 x 1, the
# grid's corner at 0), in x and y (flat) or x and z (3D). `half_height`, 3D only: the nodes farther above
# or below in grid units are left out (0: none).
static func count_cells(sensor: Node, groups: Array, to_grid, width: int, height: int, flat: bool,
		half_height := 0.0) -> Array:
	var cells := width * height
	var values := []
	values.resize(groups.size() * cells)
	for i in range(values.size()):
		values[i] = 0.0
	var viewport := sensor.get_viewport()
	for g in range(groups.size()):
		var base := g * cells
		for node in sensor.get_tree().get_nodes_in_group(groups[g]):
			var at
			# Inlined, not position_of(): a call a node costs as much as the rest of the loop.
			if flat and node is Node2D:
				at = to_grid.xform(node.global_position)
			elif not flat and node is Spatial:
				at = to_grid.xform(node.global_transform.origin)
			else:
				continue
			var row: float = at.y if flat else at.z
			# Negatives first: int() truncates towards 0, as floor() does only from 0 up.
			if at.x < 0.0 or row < 0.0 or at.x >= width or row >= height:
				continue
			if not flat and half_height > 0.0 and abs(at.y) > half_height:
				continue
			if seen_by(node, sensor, viewport):
				values[base + int(row) * width + int(at.x)] += 1.0
	return values


# Counts as min(count, max_count) / max_count, in place (max_count 0: unchanged).
static func cap(values: Array, max_count: int) -> void:
	if max_count > 0:
		for i in range(values.size()):
			values[i] = min(values[i], max_count) / max_count


# The `count` nearest nodes of `group` within `max_distance` (in the frame `to_frame` takes global
# positions to), nearest first, as [squared distance, node, relative position]; `positions` gets the
# global position of every node seen within max_distance, by instance id.
static func nearest(sensor: Node, group: String, to_frame, max_distance: float, count: int, flat: bool,
		positions: Dictionary) -> Array:
	var viewport := sensor.get_viewport()
	var limit := max_distance * max_distance
	var found := []
	for node in sensor.get_tree().get_nodes_in_group(group):
		var position
		if flat and node is Node2D:
			position = node.global_position
		elif not flat and node is Spatial:
			position = node.global_transform.origin
		else:
			continue
		var relative = to_frame.xform(position)
		var d2: float = relative.length_squared()
		if d2 > limit or not seen_by(node, sensor, viewport):
			continue
		positions[node.get_instance_id()] = position
		if found.size() == count and d2 >= found[-1][0]:
			continue
		var at := found.size()
		while at > 0 and found[at - 1][0] > d2:
			at -= 1
		found.insert(at, [d2, node, relative])
		if found.size() > count:
			found.pop_back()
	return found


# A node's own velocity (`linear_velocity`, else `velocity`, of the vector type of `zero`), else its
# displacement since `previous` (global positions by instance id) over `elapsed` seconds (0: not derived).
static func velocity_of(node: Node, previous: Dictionary, elapsed: float, zero, flat: bool):
	for property in ["linear_velocity", "velocity"]:
		if property in node and typeof(node.get(property)) == typeof(zero):
			return node.get(property)
	var id := node.get_instance_id()
	if elapsed > 0.0 and previous.has(id):
		return (position_of(node, flat) - previous[id]) / elapsed
	return zero
