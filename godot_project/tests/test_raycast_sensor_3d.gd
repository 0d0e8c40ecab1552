extends "res://tests/test_case.gd"
# The 3D raycast sensor against a real physics space: a floor under the sensor and a wall ahead.

const Sensor = preload("res://addons/rl_sync/raycast_sensor_3d.gd")

var world: Spatial


func cleanup() -> void:
	if world != null:
		world.queue_free()


func _box(centre: Vector3, extents: Vector3) -> StaticBody:
	var body := StaticBody.new()
	var shape := CollisionShape.new()
	shape.shape = BoxShape.new()
	shape.shape.extents = extents
	body.add_child(shape)
	body.translation = centre
	world.add_child(body)
	return body


# A wide floor whose top is 2 m below the origin, far from everything else in the test tree.
func _build_world() -> void:
	world = Spatial.new()
	world.translation = Vector3(5000, 0, 0)
	tree.root.add_child(world)
	_box(Vector3(0, -2.5, 0), Vector3(50, 0.5, 50))


func _sensor(pitches: Array, n_yaw: int, down: bool) -> Spatial:
	var sensor = Sensor.new()
	sensor.pitch_degrees = pitches
	sensor.n_yaw = n_yaw
	sensor.ray_down = down
	sensor.ray_length = 8.0
	world.add_child(sensor)
	return sensor


func test_layout_and_distances() -> void:
	_build_world()
	var sensor = _sensor([0.0, -30.0], 3, true)
	check_eq(sensor.n_rays(), 7, "3 yaws x 2 pitches + the ray down")
	var directions: Array = sensor.ray_directions()
	check(directions[1].distance_to(Vector3.FORWARD) < 1e-6, "the middle ray of a level row points forward (-z)")
	check(directions[0].x > 0.0 and directions[2].x < 0.0, "rows go from right (+x) to left")
	check(directions[6].distance_to(Vector3.DOWN) < 1e-6, "the last ray points down")
	yield(physics_frames(2), "completed")
	var values: Array = sensor.get_observation()
	check_eq(values.size(), 7, "one value per ray")
	check_eq(values.slice(0, 2), [0.0, 0.0, 0.0], "level rays over an open floor reach nothing")
	# 30 degrees down from 2 m above the floor: 4 m to the floor, half of the 8 m ray.
	for i in range(3, 6):
		check_near(values[i], 0.5, 0.01, "ray %d, 30 degrees down" % i)
	check_near(values[6], 0.75, 0.01, "the ray down: 2 m of 8")


func test_rays_follow_the_body_and_skip_it() -> void:
	_build_world()
	# A wall whose near face is 4 m to the right (+x); the sensor's body turns to face it.
	_box(Vector3(4.5, 0, 0), Vector3(0.5, 5, 5))
	var body := KinematicBody.new()
	var shape := CollisionShape.new()
	shape.shape = SphereShape.new()
	body.add_child(shape)
	body.rotation = Vector3(0, -PI / 2, 0)  # forward (-z) turned to +x
	world.add_child(body)
	var sensor = Sensor.new()
	sensor.pitch_degrees = [0.0]
	sensor.n_yaw = 1
	sensor.ray_down = false
	sensor.ray_length = 8.0
	body.add_child(sensor)
	yield(physics_frames(2), "completed")
	check_near(sensor.get_observation()[0], 0.5, 0.01, "the wall 4 m ahead, not the sensor's own body")
