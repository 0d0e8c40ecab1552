extends "res://tests/test_case.gd"
# GridSensor2D's counts of nodes by group and cell, on nodes placed at known points around it.

const Grid = preload("res://addons/rl_sync/grid_sensor_2d.gd")

var world: Node2D


# Freed at once: the next test's sensors must not see this one's nodes.
func cleanup() -> void:
	if world != null:
		world.free()


func _node(parent: Node, at: Vector2, group: String) -> Node2D:
	var node := Node2D.new()
	node.position = at
	node.add_to_group(group)
	parent.add_child(node)
	return node


# An agent at (1000, 1000) with a 3 x 3 grid of 10-unit cells: the middle cell spans -5..5 on each axis.
func _build(rotate: bool) -> Node2D:
	world = Node2D.new()
	tree.root.add_child(world)
	var body := Node2D.new()
	body.position = Vector2(1000, 1000)
	body.add_to_group("grid_test_b")  # the agent's own body is never counted
	world.add_child(body)
	var grid = Grid.new()
	grid.groups = ["grid_test_a", "grid_test_b"]
	grid.grid_width = 3
	grid.grid_height = 3
	grid.cell_size = Vector2(10, 10)
	grid.rotate_with_agent = rotate
	body.add_child(grid)
	var centre := Vector2(1000, 1000)
	_node(world, centre + Vector2(0, 0), "grid_test_a")  # the middle cell (4)
	_node(world, centre + Vector2(2, -3), "grid_test_a")  # the middle cell too
	_node(world, centre + Vector2(12, -12), "grid_test_a")  # top right (2)
	_node(world, centre + Vector2(-8, 7), "grid_test_b")  # bottom left (6)
	_node(world, centre + Vector2(9, 0), "grid_test_b")  # middle right (5)
	_node(world, centre + Vector2(16, 0), "grid_test_b")  # outside the grid
	return grid


func test_counts_by_group_row_by_row() -> void:
	var grid = _build(false)
	check_eq(grid.observation_size(), 18, "2 groups x 9 cells")
	check_eq(grid.get_observation(), [
		0.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0,
		0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0,
	], "counts of group a then group b, top row first")


func test_max_count_caps_and_scales_and_one_reads_presence() -> void:
	var grid = _build(false)
	grid.max_count = 1
	check_eq(grid.get_observation().slice(0, 8), [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0], "presence of group a")
	grid.max_count = 4
	check_eq(grid.get_observation()[4], 0.5, "2 of at most 4")


func test_the_grid_turns_with_the_agent_only_when_asked() -> void:
	var grid = _build(false)
	grid.get_parent().rotation = PI / 2  # the agent's +x now points along the world's +y
	check_eq(grid.get_observation()[5 + 9], 1.0, "on the world's axes: the b node at +x is still middle right")
	grid.rotate_with_agent = true
	var values: Array = grid.get_observation()
	# In the agent's frame the b node at world +x lies at local -y: the top middle cell (1).
	check_eq(values.slice(9, 17), [0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], "group b in the agent's frame")
	check_eq(values[4], 2.0, "the middle cell turns onto itself")


func test_nodes_of_another_viewport_are_not_counted() -> void:
	var grid = _build(false)
	# A copy of --copies lives in a Viewport of its own: its nodes share the tree's groups, not the grid.
	var viewport := Viewport.new()
	world.add_child(viewport)
	_node(viewport, Vector2(1000, 1000), "grid_test_a")
	check_eq(grid.get_observation()[4], 2.0, "the other viewport's node at the same point")
