extends "res://tests/test_case.gd"
# NearestNodes2D: the nearest nodes of a group, sorted and zero-padded, with their velocities, on nodes
# placed at known points around it.

const Nearest = preload("res://addons/rl_sync/nearest_nodes_2d.gd")
const GROUP := "nearest_test"

var world: Node2D
var sensor


# Freed at once: the next test's sensors must not see this one's nodes.
func cleanup() -> void:
	if world != null:
		world.free()


# A Node2D with a `velocity` property, as a KinematicBody2D's script usually has.
func _moving_script() -> GDScript:
	var script := GDScript.new()
	script.source_code = "extends Node2D\nvar velocity := Vector2.ZERO\n"
	script.reload()
	return script


func _node(at: Vector2, velocity = null) -> Node2D:
	var node := Node2D.new()
	if velocity != null:
		node.set_script(_moving_script())
		node.velocity = velocity
	node.position = at
	node.add_to_group(GROUP)
	world.add_child(node)
	return node


# Values of float32 vectors against decimals.
func _check_values(actual: Array, expected: Array, what: String) -> void:
	check_eq(actual.size(), expected.size(), what + ": the size")
	for i in range(min(actual.size(), expected.size())):
		check_near(actual[i], expected[i], 1e-6, "%s: value %d of %s" % [what, i, to_json(actual)])


# The sensor's body at (2000, 0), seeing 100 units around, speeds divided by 50.
func _build(count: int) -> void:
	world = Node2D.new()
	tree.root.add_child(world)
	var body := Node2D.new()
	body.position = Vector2(2000, 0)
	body.add_to_group(GROUP)  # the agent's own body is never seen
	world.add_child(body)
	sensor = Nearest.new()
	sensor.group = GROUP
	sensor.count = count
	sensor.max_distance = 100.0
	sensor.max_speed = 50.0
	body.add_child(sensor)


func test_the_nearest_come_first_with_position_velocity_and_presence() -> void:
	_build(2)
	_node(Vector2(2000 + 60, 0))
	_node(Vector2(2000, -20), Vector2(10, -25))
	_node(Vector2(2000 - 30, 40))  # 50 away
	_node(Vector2(2000 + 150, 0))  # beyond max_distance
	check_eq(sensor.observation_size(), 10, "2 nodes x 5 values")
	_check_values(sensor.get_observation(), [
		0.0, -0.2, 0.2, -0.5, 1.0,
		-0.3, 0.4, 0.0, 0.0, 1.0,
	], "the node 20 away (its own velocity), then the one 50 away; not the one 60 away")


func test_missing_nodes_are_zero_padded() -> void:
	_build(4)
	_node(Vector2(2000 + 80, 0))
	_node(Vector2(2000 + 10, 0))
	_node(Vector2(2000 + 500, 0))  # beyond max_distance
	_check_values(sensor.get_observation(), [
		0.1, 0.0, 0.0, 0.0, 1.0,
		0.8, 0.0, 0.0, 0.0, 1.0,
		0.0, 0.0, 0.0, 0.0, 0.0,
		0.0, 0.0, 0.0, 0.0, 0.0,
	], "two nodes seen, two empty slots")


func test_a_node_without_a_velocity_moves_at_its_displacement_over_the_physics_time() -> void:
	_build(1)
	var node := _node(Vector2(2000 + 10, 0))
	yield(physics_frames(1), "completed")
	check_eq(sensor.get_observation()[2], 0.0, "a node not seen before reads as still")
	node.position.x += 3.0
	# Three physics frames at 60 per second: 3 units in 1/20 s is 60 units/s, 1.2 of max_speed.
	yield(physics_frames(3), "completed")
	var values: Array = sensor.get_observation()
	check_near(values[0], 0.13, 1e-6, "its new position")
	check_near(values[2], 1.2, 1e-4, "its velocity from the previous observation")
	node.position.x += 3.0
	sensor.reset()
	yield(physics_frames(3), "completed")
	check_eq(sensor.get_observation()[2], 0.0, "after reset() a moved node reads as still")


func test_positions_turn_with_the_agent_only_when_asked() -> void:
	_build(1)
	_node(Vector2(2000 + 40, 0), Vector2(25, 0))
	sensor.get_parent().rotation = PI / 2  # the agent's +x now points along the world's +y
	_check_values(sensor.get_observation(), [0.4, 0.0, 0.5, 0.0, 1.0], "on the world's axes")
	sensor.rotate_with_agent = true
	# In the agent's frame the node at world +x lies at local -y, and so does its velocity.
	_check_values(sensor.get_observation(), [0.0, -0.4, 0.0, -0.5, 1.0], "in the agent's frame")


func test_a_rigid_body_moves_at_its_linear_velocity() -> void:
	_build(1)
	var ball := RigidBody2D.new()
	ball.gravity_scale = 0.0
	ball.linear_velocity = Vector2(-20, 10)
	ball.position = Vector2(2000, 30)
	ball.add_to_group(GROUP)
	world.add_child(ball)
	_check_values(sensor.get_observation(), [0.0, 0.3, -0.4, 0.2, 1.0], "its place and its linear_velocity")
