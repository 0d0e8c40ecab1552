extends Node2D
# A fan of rays cast from this node's position, for any 2D game.
#
# get_observation() returns one value per ray in [0, 1]: 1 - distance / ray_length for the nearest
# hit, 0 when nothing is within reach, so near obstacles read as large values. With classes listed
# (`hit_groups`, `hit_layers`) each ray reads as [distance, one-hot of what it hit] instead
# (ray_hits.gd says how), observation_size() values in all.
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
# Areas are seen when their collision_layer shares a bit with collision_mask (monitorable and
# monitoring do not matter to a ray; an area on no layer is never hit).
export var collide_with_areas := false
export var collide_with_bodies := true
# What a hit is, as a one-hot after each ray's distance: the groups of the node hit, then layer bits
# (each entry a mask: 4 is layer 3). Empty, both: distances alone.
export(Array, String) var hit_groups := []
export(Array, int) var hit_layers := []
# Draws the rays in windowed runs; costs nothing headless.
export var debug_draw := true

const RayHits = preload("res://addons/rl_sync/ray_hits.gd")

var _rays := []
var _last_values := []


func _ready() -> void:
	# Drawing rays is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"
	for i in range(n_rays):
		var ray := RayCast2D.new()
		RayHits.configure(ray, ray_direction(i) * ray_length, self)
		add_child(ray)
		_rays.append(ray)


# Values per ray: 1, plus one per class listed.
func observation_size() -> int:
	return n_rays * (1 + RayHits.n_classes(self))


func get_observation() -> Array:
	var values := RayHits.read(_rays, ray_length, hit_groups, hit_layers)
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
	var n := RayHits.n_classes(self)
	for i in range(_last_values.size() / (1 + n)):
		var seen: Array = RayHits.reading(_last_values, i, n)
		draw_line(Vector2.ZERO, ray_direction(i) * ray_length * seen[0], RayHits.colour(seen[1], n, 0.5), 1.0)
