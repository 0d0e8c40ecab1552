extends Node2D
# A fan of rays cast from this node's position, for any 2D game.
#
# get_observation() returns one value per ray in [0, 1]: 1 - distance / ray_length for the nearest
# hit, 0 when nothing is within reach, so near obstacles read as large values. The rays query the
# physics space directly (no RayCast2D nodes), which is cheap enough for many agents per instance.

export var n_rays := 16
export var ray_length := 300.0
# Total angle covered, in degrees; 360 gives a full circle.
export var cone_degrees := 360.0
# Rotation of the first ray, in degrees (0 points along +x).
export var start_degrees := 0.0
export(int, LAYERS_2D_PHYSICS) var collision_mask := 1
export var collide_with_areas := false
# Draws the rays in windowed runs; costs nothing headless.
export var debug_draw := true

var _last_values := []
var _exclude := []


func _ready() -> void:
	# Drawing rays is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"
	# Never report our own body.
	var parent := get_parent()
	if parent is CollisionObject2D:
		_exclude = [parent]


func get_observation() -> Array:
	var space_state := get_world_2d().direct_space_state
	var origin := global_position
	var values := []
	for i in range(n_rays):
		var direction := _ray_direction(i).rotated(global_rotation)
		var hit := space_state.intersect_ray(origin, origin + direction * ray_length, _exclude,
				collision_mask, true, collide_with_areas)
		if hit.empty():
			values.append(0.0)
		else:
			values.append(1.0 - origin.distance_to(hit.position) / ray_length)
	_last_values = values
	if debug_draw and is_visible_in_tree():
		update()
	return values


func _ray_direction(i: int) -> Vector2:
	# A full circle spaces rays evenly without doubling the last one onto the first.
	var steps: float = n_rays if cone_degrees >= 360.0 else max(n_rays - 1, 1)
	var angle := deg2rad(start_degrees + cone_degrees * i / steps)
	return Vector2(cos(angle), sin(angle))


func _draw() -> void:
	if not debug_draw:
		return
	for i in range(min(n_rays, _last_values.size())):
		var reach: float = ray_length * (1.0 - _last_values[i]) if _last_values[i] > 0.0 else ray_length
		var color := Color(1, 0.4, 0.3, 0.5) if _last_values[i] > 0.0 else Color(1, 1, 1, 0.12)
		draw_line(Vector2.ZERO, _ray_direction(i) * reach, color, 1.0)
