extends Spatial
# A grid of rays cast from this node's position, for any 3D game (the 3D sibling of
# raycast_sensor_2d.gd).
#
# The rays fan out over `n_yaw` directions across `yaw_degrees` (centred on this node's forward, -z)
# at each angle of `pitch_degrees` (0 is level, negative points down, so a walker sees the floor's
# edges ahead of it). get_observation() returns one value per ray in [0, 1]: 1 - distance /
# ray_length for the nearest hit, 0 when nothing is within reach, so near surfaces read as large
# values. Rays are listed pitch by pitch, each row from right to left (as the yaw grows). With classes
# listed (`hit_groups`, `hit_layers`) each ray reads as [distance, one-hot of what it hit] instead
# (ray_hits.gd says how), observation_size() values in all.
# The rays are RayCast children that stay disabled and are cast only when an observation is asked
# for: no Dictionary per ray (as PhysicsDirectSpaceState.intersect_ray builds), and nothing to pay on
# physics frames between decisions.

export var n_yaw := 5
export var yaw_degrees := 120.0
export(Array, float) var pitch_degrees := [-20.0, -45.0, -70.0]
# One more ray straight down (under the agent's feet) after the grid.
export var ray_down := true
export var ray_length := 8.0
export(int, LAYERS_3D_PHYSICS) var collision_mask := 1
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
var _geometry: ImmediateGeometry = null


func _ready() -> void:
	# Drawing rays is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"
	for direction in ray_directions():
		var ray := RayCast.new()
		RayHits.configure(ray, direction * ray_length, self)
		add_child(ray)
		_rays.append(ray)
	if debug_draw:
		_geometry = ImmediateGeometry.new()
		var material := SpatialMaterial.new()
		material.flags_unshaded = true
		material.vertex_color_use_as_albedo = true
		material.flags_transparent = true
		_geometry.material_override = material
		add_child(_geometry)


func n_rays() -> int:
	return n_yaw * pitch_degrees.size() + (1 if ray_down else 0)


# Unit directions of every ray in this node's frame, in observation order.
func ray_directions() -> Array:
	var directions := []
	for pitch in pitch_degrees:
		for i in range(n_yaw):
			var yaw := 0.0 if n_yaw == 1 else deg2rad(yaw_degrees * (float(i) / (n_yaw - 1) - 0.5))
			var p := deg2rad(pitch)
			# yaw > 0 turns to the left of forward (-z), as a rotation about +y does.
			directions.append(Vector3(-sin(yaw) * cos(p), sin(p), -cos(yaw) * cos(p)))
	if ray_down:
		directions.append(Vector3.DOWN)
	return directions


# Values per ray: 1, plus one per class listed.
func observation_size() -> int:
	return n_rays() * (1 + RayHits.n_classes(self))


func get_observation() -> Array:
	var values := RayHits.read(_rays, ray_length, hit_groups, hit_layers)
	if debug_draw:
		_draw_rays(values)
	return values


func _draw_rays(values: Array) -> void:
	_geometry.clear()
	_geometry.begin(Mesh.PRIMITIVE_LINES)
	var n := RayHits.n_classes(self)
	for i in range(_rays.size()):
		var seen: Array = RayHits.reading(values, i, n)
		_geometry.set_color(RayHits.colour(seen[1], n, 0.8))
		_geometry.add_vertex(Vector3.ZERO)
		_geometry.add_vertex(_rays[i].cast_to * seen[0])
	_geometry.end()
