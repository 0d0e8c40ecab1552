extends "res://tests/test_case.gd"
# GridSensor3D and NearestNodes3D on nodes placed at known points around them.

const Grid = preload("res://addons/rl_sync/grid_sensor_3d.gd")
const Nearest = preload("res://addons/rl_sync/nearest_nodes_3d.gd")

var world: Spatial
var body: Spatial


# Freed at once: the next test's sensors must not see this one's nodes.
func cleanup() -> void:
	if world != null:
		world.free()


func _node(at: Vector3, group: String) -> Spatial:
	var node := Spatial.new()
	node.translation = at
	node.add_to_group(group)
	world.add_child(node)
	return node


# The agent's body at (100, 0, 100), in the group it looks for (and so never seen).
func _build() -> void:
	world = Spatial.new()
	tree.root.add_child(world)
	body = Spatial.new()
	body.translation = Vector3(100, 0, 100)
	body.add_to_group("group_3d_test")
	world.add_child(body)


func test_the_3d_grid_counts_by_row_from_the_front_and_by_height() -> void:
	_build()
	var grid = Grid.new()
	grid.groups = ["group_3d_test"]
	grid.grid_width = 3
	grid.grid_depth = 3
	grid.cell_size = Vector2(2, 2)
	grid.height = 1.5
	body.add_child(grid)
	var at := Vector3(100, 0, 100)
	_node(at + Vector3(0.5, 0, -0.5), "group_3d_test")  # the middle cell (4)
	_node(at + Vector3(-2.5, 1, -2.5), "group_3d_test")  # front left (0)
	_node(at + Vector3(2, 0, 2), "group_3d_test")  # back right (8)
	_node(at + Vector3(2, 0, 2), "group_3d_test")  # back right again
	_node(at + Vector3(0, 3, 0), "group_3d_test")  # above the height counted
	check_eq(grid.observation_size(), 9, "1 group x 9 cells")
	check_eq(grid.get_observation(), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0], "counts, front row first")
	body.rotation = Vector3(0, PI / 2, 0)  # forward (-z) turned to -x
	grid.rotate_with_agent = true
	# Turned a quarter to the left, the front-left node (-x, -z) is now front right, the back right one back left.
	check_eq(grid.get_observation(), [0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0], "counts in the agent's frame")


func test_the_nearest_3d_nodes_sorted_and_padded_with_velocities() -> void:
	_build()
	var nearest = Nearest.new()
	nearest.group = "group_3d_test"
	nearest.count = 3
	nearest.max_distance = 10.0
	nearest.max_speed = 5.0
	body.add_child(nearest)
	var at := Vector3(100, 0, 100)
	var far := _node(at + Vector3(0, 0, -4), "group_3d_test")
	_node(at + Vector3(1, 2, 0), "group_3d_test")
	_node(at + Vector3(20, 0, 0), "group_3d_test")  # beyond max_distance
	yield(physics_frames(1), "completed")
	var values: Array = nearest.get_observation()
	var expected := [0.1, 0.2, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, -0.4, 0.0, 0.0, 0.0, 1.0,
			0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
	check_eq(values.size(), 21, "3 slots of 7")
	for i in range(expected.size()):
		check_near(values[i], expected[i], 1e-6, "value %d of %s" % [i, to_json(values)])
	far.translation.z += 1.0  # 1 m back in 6 physics frames at 60 a second: 10 m/s, 2 of max_speed
	yield(physics_frames(6), "completed")
	check_near(nearest.get_observation()[12], 2.0, 1e-4, "the far node's z velocity, from its displacement")
