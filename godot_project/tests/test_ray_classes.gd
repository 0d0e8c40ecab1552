extends "res://tests/test_case.gd"
# What the ray sensors' rays hit, as a one-hot by group and layer (ray_hits.gd), against real physics
# spaces: 2D rays that see a wall, a coin (an area, not monitorable) and a body known by its layer,
# and 3D rays that tell the floor from a crate.

const Sensor2D = preload("res://addons/rl_sync/raycast_sensor_2d.gd")
const Sensor3D = preload("res://addons/rl_sync/raycast_sensor_3d.gd")

var world: Node


# Freed at once: the next test's sensors must not see this one's nodes.
func cleanup() -> void:
	if world != null:
		world.free()


func _rect(object: CollisionObject2D, centre: Vector2, extents: Vector2, layer: int) -> CollisionObject2D:
	var shape := CollisionShape2D.new()
	shape.shape = RectangleShape2D.new()
	shape.shape.extents = extents
	object.add_child(shape)
	object.position = centre
	object.collision_layer = layer
	world.add_child(object)
	return object


# Around the origin, 100 px away, each 20 px thick: a wall (group "wall", layer 1) at +x, a coin like
# Godot's platformer demo's (an Area2D, neither monitorable nor monitoring, group "coin", on layer 3
# so that rays can see it) at +y, a body in no group on layer 4 at -x; and at -y an area on no layer.
func _build_2d() -> void:
	world = Node2D.new()
	world.position = Vector2(-3000, 0)  # far from every other test's nodes
	tree.root.add_child(world)
	_rect(StaticBody2D.new(), Vector2(110, 0), Vector2(10, 40), 1).add_to_group("wall")
	var coin: Area2D = _rect(Area2D.new(), Vector2(0, 110), Vector2(40, 10), 4)
	coin.monitorable = false
	coin.monitoring = false
	coin.add_to_group("coin")
	_rect(StaticBody2D.new(), Vector2(-110, 0), Vector2(10, 40), 8)
	var unseen: Area2D = _rect(Area2D.new(), Vector2(0, -110), Vector2(40, 10), 0)
	unseen.add_to_group("coin")


func _sensor_2d(groups: Array, layers: Array, areas: bool) -> Node2D:
	var sensor = Sensor2D.new()
	sensor.n_rays = 4
	sensor.ray_length = 200.0
	sensor.collision_mask = 1 | 4 | 8
	sensor.collide_with_areas = areas
	sensor.hit_groups = groups
	sensor.hit_layers = layers
	world.add_child(sensor)
	return sensor


func test_each_2d_ray_reads_its_distance_then_the_class_of_what_it_hit() -> void:
	_build_2d()
	var sensor = _sensor_2d(["wall", "coin"], [8], true)
	yield(physics_frames(2), "completed")
	check_eq(sensor.observation_size(), 16, "4 rays x (distance + 3 classes)")
	var values: Array = sensor.get_observation()
	check_eq(values.size(), 16, "the observation's size")
	# Rays +x, +y, -x, -y; every obstacle's near face is 100 px away, half the ray.
	var expected := [0.5, 1.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
	for i in range(16):
		check_near(values[i], expected[i], 0.01, "value %d of %s" % [i, to_json(values)])


func test_a_hit_of_no_listed_class_and_a_hit_of_two_read_as_none_and_the_first() -> void:
	_build_2d()
	# The wall is in group "wall" and on layer 1: listed as both, the group (listed first) wins.
	var sensor = _sensor_2d(["coin", "wall"], [1], true)
	yield(physics_frames(2), "completed")
	var values: Array = sensor.get_observation()
	check_eq(values.slice(1, 3), [0.0, 1.0, 0.0], "the wall: its group, not its layer too")
	check_eq(values.slice(5, 7), [1.0, 0.0, 0.0], "the coin")
	check_near(values[8], 0.5, 0.01, "the body on layer 4 is hit")
	check_eq(values.slice(9, 11), [0.0, 0.0, 0.0], "and is of no listed class")


func test_rays_see_areas_only_when_asked_and_never_an_area_on_no_layer() -> void:
	_build_2d()
	var blind = _sensor_2d(["coin"], [], false)
	var seeing = _sensor_2d(["coin"], [], true)
	yield(physics_frames(2), "completed")
	check_eq(blind.get_observation().slice(2, 3), [0.0, 0.0], "without collide_with_areas the coin is not hit")
	var values: Array = seeing.get_observation()
	check_near(values[2], 0.5, 0.01, "with it the coin (not monitorable) is hit")
	check_eq(values[3], 1.0, "and read as a coin")
	check_eq(values.slice(6, 7), [0.0, 0.0], "an area on no layer is never hit")


func test_without_classes_a_2d_ray_reads_its_distance_alone() -> void:
	_build_2d()
	var sensor = _sensor_2d([], [], true)
	yield(physics_frames(2), "completed")
	check_eq(sensor.observation_size(), 4, "one value per ray")
	var values: Array = sensor.get_observation()
	check_eq(values.size(), 4, "one value per ray")
	for i in range(3):
		check_near(values[i], 0.5, 0.01, "ray %d" % i)
	check_eq(values[3], 0.0, "the ray to the area on no layer")


func _box(centre: Vector3, extents: Vector3, layer: int) -> StaticBody:
	var body := StaticBody.new()
	var shape := CollisionShape.new()
	shape.shape = BoxShape.new()
	shape.shape.extents = extents
	body.add_child(shape)
	body.translation = centre
	body.collision_layer = layer
	world.add_child(body)
	return body


func test_3d_rays_read_the_class_of_what_they_hit() -> void:
	world = Spatial.new()
	world.translation = Vector3(-5000, 0, 0)
	tree.root.add_child(world)
	# A floor (group "floor") 2 m below, a crate on layer 2 whose near face is 4 m ahead (-z).
	_box(Vector3(0, -2.5, 0), Vector3(50, 0.5, 50), 1).add_to_group("floor")
	_box(Vector3(0, 0, -4.5), Vector3(0.5, 0.5, 0.5), 2)
	var sensor = Sensor3D.new()
	sensor.pitch_degrees = [0.0]
	sensor.n_yaw = 3
	sensor.yaw_degrees = 90.0
	sensor.ray_down = true
	sensor.ray_length = 8.0
	sensor.collision_mask = 1 | 2
	sensor.hit_groups = ["floor"]
	sensor.hit_layers = [2]
	world.add_child(sensor)
	yield(physics_frames(2), "completed")
	check_eq(sensor.observation_size(), 12, "4 rays x (distance + 2 classes)")
	var values: Array = sensor.get_observation()
	check_eq(values.size(), 12, "the observation's size")
	check_eq(values.slice(0, 2), [0.0, 0.0, 0.0], "the ray 45 degrees to the right reaches nothing")
	check_near(values[3], 0.5, 0.01, "the crate 4 m ahead")
	check_eq(values.slice(4, 5), [0.0, 1.0], "read by its layer")
	check_eq(values.slice(6, 8), [0.0, 0.0, 0.0], "the ray to the left reaches nothing")
	check_near(values[9], 0.75, 0.01, "the floor 2 m down")
	check_eq(values.slice(10, 11), [1.0, 0.0], "read by its group")
