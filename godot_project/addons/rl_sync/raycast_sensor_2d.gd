extends Node2D
# A fan of rays cast from this node's position, for any 2D game.
#
# get_observation() returns one value per ray in [0, 1]: 1 - distance / ray_length for the nearest
# hit, 0 when nothing is within reach, so near obstacles read as large values.
# The rays are RayCast2D children that stay disabled and are cast only when an observation is asked
# for: that is about 3x cheaper than Physics2DDirectSpaceState.intersect_ray (which builds a
# Dictionary per ray) and costs nothing on physics frames between decisions.

export var n_rays := 16
export var ray_length := 300.0
# Total angle covered, in degrees; 360 gives a full circle.
export var cone_degrees := 360.0
# Rotation of the first ray, in degrees (0 points along +x, in this node's frame).
export var start_degrees := 0.0
export(int, LAYERS_2D_PHYSICS) var collision_mask := 1
export var collide_with_areas := false
# Draws the rays in windowed runs; costs nothing headless.
export var debug_draw := true

var _rays := []
var _last_values := []


func _ready() -> void:
	# Drawing rays is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"
	for i in range(n_rays):
		var ray := RayCast2D.new()
		ray.enabled = false
		ray.cast_to = ray_direction(i) * ray_length
		ray.collision_mask = collision_mask
		ray.collide_with_areas = collide_with_areas
		# Never report our own body.
		if get_parent() is CollisionObject2D:
			ray.add_exception(get_parent())
		add_child(ray)
		_rays.append(ray)


func get_observation() -> Array:
	var values := []
	for ray in _rays:
		ray.force_raycast_update()
		if ray.is_colliding():
			# Measured in the ray's own frame, so a scaled or rotated scene reads the same.
			values.append(1.0 - ray.to_local(ray.get_collision_point()).length() / ray_length)
		else:
			values.append(0.0)
	if debug_draw:
		# A copy: callers usually append their own values to the returned array.
		_last_values = values.duplicate()
		update()
	return values


# Direction of ray i in this node's frame.
func ray_direction(i: int) -> Vector2:
	# A full circle spaces rays evenly without doubling the last one onto the first.
	var steps: float = n_rays if cone_degrees >= 360.0 else max(n_rays - 1, 1)
	var angle := deg2rad(start_degrees + cone_degrees * i / steps)
	return Vector2(cos(angle), sin(angle))


func _draw() -> void:
	for i in range(_last_values.size()):
		var hit: bool = _last_values[i] > 0.0
		var reach: float = ray_length * (1.0 - _last_values[i]) if hit else ray_length
		var color := Color(1, 0.4, 0.3, 0.5) if hit else Color(1, 1, 1, 0.12)
		draw_line(Vector2.ZERO, ray_direction(i) * reach, color, 1.0)
