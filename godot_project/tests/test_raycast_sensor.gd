extends "res://tests/test_case.gd"
# The raycast sensor against a real physics space.

const Sensor = preload("res://addons/rl_sync/raycast_sensor_2d.gd")

var world: Node2D


func cleanup() -> void:
	if world != null:
		world.queue_free()


func _build_world() -> Node2D:
	world = Node2D.new()
	var wall := StaticBody2D.new()
	var shape := CollisionShape2D.new()
	shape.shape = RectangleShape2D.new()
	shape.shape.extents = Vector2(10, 500)
	# The wall's near face is 100 px to the right of the origin.
	wall.position = Vector2(110, 0)
	wall.add_child(shape)
	world.add_child(wall)
	tree.root.add_child(world)
	return world


func test_distances_are_normalised() -> void:
	_build_world()
	var sensor = Sensor.new()
	sensor.n_rays = 4
	sensor.ray_length = 200.0
	world.add_child(sensor)
	yield(physics_frames(2), "completed")
	var values: Array = sensor.get_observation()
	check_eq(values.size(), 4, "one value per ray")
	# Ray 0 points at the wall (+x), the others (+y, -x, -y) reach nothing.
	check_near(values[0], 0.5, 0.01, "ray towards the wall at half its length")
	check_eq(values.slice(1, 3), [0.0, 0.0, 0.0], "rays that hit nothing")


func test_distances_ignore_the_scale_of_the_scene() -> void:
	_build_world()
	# Readings are in the ray's own frame: a scaled scene must not change them.
	world.scale = Vector2(0.5, 0.5)
	var sensor = Sensor.new()
	sensor.n_rays = 4
	sensor.ray_length = 200.0
	world.add_child(sensor)
	yield(physics_frames(2), "completed")
	check_near(sensor.get_observation()[0], 0.5, 0.01, "ray towards the wall in a half-size scene")


func test_rays_follow_rotation() -> void:
	_build_world()
	var sensor = Sensor.new()
	sensor.n_rays = 4
	sensor.ray_length = 200.0
	sensor.rotation = -PI / 2
	world.add_child(sensor)
	yield(physics_frames(2), "completed")
	var values: Array = sensor.get_observation()
	# Rotated a quarter turn back, ray 1 (local +y) now points along +x, at the wall.
	check_near(values[1], 0.5, 0.01, "rotated ray towards the wall")
	check_eq(values[0], 0.0, "rotated ray 0 reaches nothing")
