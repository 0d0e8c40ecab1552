extends Spatial
# One arena: a course of box platforms floating over a void, and the agent's body.
#
# A course is COURSE_PLATFORMS platforms in a row: the agent starts on the first; the last is the
# goal. Consecutive platforms are separated by a gap (jump it) and may be higher or lower, and each
# turns a little from the previous one's heading. When the agent reaches the goal, the goal becomes
# the first platform of a new course (the agent stays where it stands); a new episode starts a new
# course at the arena's origin. Everything is in this node's frame: arenas sit apart in world space
# and are never scaled.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const COURSE_PLATFORMS := 4
const PLATFORM_THICKNESS := 1.0
# Side lengths of the (square) platforms, in metres.
const SIZE_MIN := 2.5
const SIZE_MAX := 4.0
# Edge-to-edge gap along the course and height change between consecutive platforms.
const GAP_MIN := 0.6
const GAP_MAX := 2.2
const RISE_MIN := -0.6
const RISE_MAX := 0.5
# The course as environment parameters (env_params.gd), defaulting to the constants above; the agent
# sets them from its episode's values (jumper_agent.gd). docs/env_params.md has the hard setting.
const COURSE_PARAMS := {
	"gap_min": {"default": GAP_MIN, "min": 0.2, "max": 4.0},
	"gap_max": {"default": GAP_MAX, "min": 0.2, "max": 4.0},
	"rise_min": {"default": RISE_MIN, "min": -1.0, "max": 1.0},
	"rise_max": {"default": RISE_MAX, "min": -1.0, "max": 1.0},
	"size_min": {"default": SIZE_MIN, "min": 1.5, "max": 5.0},
	"size_max": {"default": SIZE_MAX, "min": 1.5, "max": 5.0},
}
const TOP_LIMIT := 2.0
# Turn of the course's heading from one platform to the next, in radians.
const TURN_MAX := 0.5
# A course that starts farther than this from the origin heads back towards it, so courses stay in
# the arena's own patch of world.
const ROAM_RADIUS := 20.0
# Below the lowest platform's top by this much, the agent has fallen.
const FALL_DEPTH := 3.0

const PLATFORM_COLOR := Color(0.45, 0.5, 0.6)
const GOAL_COLOR := Color(0.95, 0.75, 0.25)

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()
# The course's platforms (StaticBody), in order: [0] the start ... [COURSE_PLATFORMS - 1] the goal.
var platforms := []
# Each platform's top height, heading (about +y) and half side, by node.
var _top := {}
var _heading := {}
var _half := {}
var fall_y := -FALL_DEPTH
# The course's parameters in force (COURSE_PARAMS' names -> values), for this episode's courses.
var course := {}

onready var player: KinematicBody = $Player
onready var controller = $Player/AgentController

var _materials := {}


func _ready() -> void:
	# Each arena has its own generator, so an arena's episodes depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)
	for name in COURSE_PARAMS:
		course[name] = COURSE_PARAMS[name]["default"]
	var shows := not RlArgs.is_headless()
	for color in [PLATFORM_COLOR, GOAL_COLOR]:
		var material := SpatialMaterial.new()
		material.albedo_color = color
		_materials[color] = material
	for _i in range(COURSE_PLATFORMS):
		var body := StaticBody.new()
		var shape := CollisionShape.new()
		shape.shape = BoxShape.new()
		body.add_child(shape)
		if shows:
			var mesh := MeshInstance.new()
			mesh.name = "Mesh"
			mesh.mesh = CubeMesh.new()  # 2 x 2 x 2: its scale is the box's extents (a mesh only draws)
			body.add_child(mesh)
		# Out of the way until a course places it (never where an agent starts).
		body.translation = Vector3(0, -1000, 0)
		add_child(body)
		platforms.append(body)


func goal() -> StaticBody:
	return platforms[COURSE_PLATFORMS - 1]


# A new course from the origin, with a random heading (a new episode).
func new_course() -> void:
	_place(platforms[0], Vector3.ZERO, 0.0, rng.randf_range(-PI, PI), rng.randf_range(course["size_min"], course["size_max"]) / 2.0)
	_extend()


# The goal becomes the start of a new course (the agent reached it and stands on it).
func next_course() -> void:
	platforms.push_front(platforms.pop_back())
	_extend()


# Lays out platforms 1.. after platform 0.
func _extend() -> void:
	var start: StaticBody = platforms[0]
	var heading: float = _heading[start]
	var centre := Vector3(start.translation.x, 0.0, start.translation.z)
	if centre.length() > ROAM_RADIUS:
		heading = _heading_towards(-centre) + rng.randf_range(-0.7, 0.7)
	else:
		heading += rng.randf_range(-1.2, 1.2)
	var lowest: float = _top[start]
	for k in range(1, COURSE_PLATFORMS):
		var previous: StaticBody = platforms[k - 1]
		heading += rng.randf_range(-TURN_MAX, TURN_MAX)
		var turn := heading - float(_heading[previous])
		var half := rng.randf_range(course["size_min"], course["size_max"]) / 2.0
		# The previous square's extent along the new heading, so the gap is measured edge to edge.
		var reach: float = _half[previous] * (abs(cos(turn)) + abs(sin(turn)))
		var distance: float = reach + rng.randf_range(course["gap_min"], course["gap_max"]) + half
		var top: float = clamp(_top[previous] + rng.randf_range(course["rise_min"], course["rise_max"]), -TOP_LIMIT, TOP_LIMIT)
		var previous_centre := Vector3(previous.translation.x, 0.0, previous.translation.z)
		_place(platforms[k], previous_centre + direction(heading) * distance, top, heading, half)
		lowest = min(lowest, top)
	fall_y = lowest - FALL_DEPTH
	for k in range(COURSE_PLATFORMS):
		var mesh = platforms[k].get_node_or_null("Mesh")
		if mesh != null:
			mesh.material_override = _materials[GOAL_COLOR if k == COURSE_PLATFORMS - 1 else PLATFORM_COLOR]


func _place(body: StaticBody, centre: Vector3, top: float, heading: float, half: float) -> void:
	var extents := Vector3(half, PLATFORM_THICKNESS / 2.0, half)
	body.transform = Transform(Basis(Vector3.UP, heading), Vector3(centre.x, top - extents.y, centre.z))
	body.get_child(0).shape.extents = extents
	var mesh = body.get_node_or_null("Mesh")
	if mesh != null:
		mesh.scale = extents
	_top[body] = top
	_heading[body] = heading
	_half[body] = half


# The horizontal unit vector a node rotated by `heading` about +y faces (its -z).
static func direction(heading: float) -> Vector3:
	return Vector3(-sin(heading), 0.0, -cos(heading))


static func _heading_towards(v: Vector3) -> float:
	return atan2(-v.x, -v.z)


# Where an agent stands on platform k's top: its centre.
func top_centre(k: int) -> Vector3:
	var body: StaticBody = platforms[k]
	return Vector3(body.translation.x, _top[body], body.translation.z)


func heading_of(k: int) -> float:
	return _heading[platforms[k]]


# Whether a point (the agent's feet, in this arena's frame) is on platform k's top.
func is_on(k: int, point: Vector3) -> bool:
	var body: StaticBody = platforms[k]
	var local: Vector3 = body.transform.xform_inv(point)
	var half: float = _half[body]
	return abs(local.x) <= half and abs(local.z) <= half and abs(point.y - _top[body]) < 0.3
