extends Spatial
# One room of forager: a closed square room (floor and four walls of different colours, so a camera can
# tell which way it faces), TARGETS bright targets at random places, and the agent's body. Everything is
# in this node's frame; rooms sit far apart in world space and are never scaled.
#
# Every surface is unshaded (flat colours, no light needed: the same picture at any time), and the targets'
# colour appears nowhere else, so even 36 x 36 pixels show one as a patch of TARGET_COLOR.

const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const HALF := 5.0  # the room is 10 m x 10 m inside its walls
const WALL_HEIGHT := 3.0
const WALL_THICKNESS := 0.5
const TARGETS := 4
const TARGET_RADIUS := 0.35
const TARGET_HEIGHT := 0.6
# A target appears at least this far from the agent and from the other targets, and this far inside the walls.
const TARGET_CLEARANCE := 1.5
const WALL_MARGIN := 0.8
# Where a target "ahead" appears (the target_ahead parameter): straight in front of the agent.
const AHEAD_DISTANCE := 2.5

const TARGET_COLOR := Color(1.0, 0.9, 0.1)
const FLOOR_COLOR := Color(0.22, 0.22, 0.26)
const WALL_COLORS := [Color(0.6, 0.3, 0.3), Color(0.3, 0.55, 0.35), Color(0.3, 0.35, 0.65), Color(0.55, 0.5, 0.45)]

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()
# The targets' MeshInstances (their translation is where they are; y = TARGET_HEIGHT).
var targets := []

onready var player: KinematicBody = $Player
onready var controller = $Player/AgentController


func _ready() -> void:
	# Each room has its own generator, so its episodes depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)
	_add_box(Vector3(0, -0.05, 0), Vector3(HALF, 0.05, HALF), FLOOR_COLOR, false)
	var long := HALF + WALL_THICKNESS
	for k in range(4):
		var along_x: bool = k % 2 == 0
		var side := -1.0 if k < 2 else 1.0
		var centre := Vector3(0, WALL_HEIGHT / 2.0, side * (HALF + WALL_THICKNESS / 2.0)) if along_x \
				else Vector3(side * (HALF + WALL_THICKNESS / 2.0), WALL_HEIGHT / 2.0, 0)
		var extents := Vector3(long, WALL_HEIGHT / 2.0, WALL_THICKNESS / 2.0) if along_x \
				else Vector3(WALL_THICKNESS / 2.0, WALL_HEIGHT / 2.0, long)
		_add_box(centre, extents, WALL_COLORS[k], true)
	var sphere := SphereMesh.new()
	sphere.radius = TARGET_RADIUS
	sphere.height = 2.0 * TARGET_RADIUS
	sphere.radial_segments = 12
	sphere.rings = 6
	sphere.material = _material(TARGET_COLOR)
	for _i in range(TARGETS):
		var target := MeshInstance.new()
		target.mesh = sphere
		add_child(target)
		targets.append(target)


func _add_box(centre: Vector3, extents: Vector3, color: Color, solid: bool) -> void:
	var mesh := MeshInstance.new()
	mesh.mesh = CubeMesh.new()  # 2 x 2 x 2: its scale is the box's extents
	mesh.material_override = _material(color)
	mesh.translation = centre
	mesh.scale = extents
	add_child(mesh)
	if solid:
		var body := StaticBody.new()
		var shape := CollisionShape.new()
		shape.shape = BoxShape.new()
		shape.shape.extents = extents
		body.add_child(shape)
		body.translation = centre
		add_child(body)


static func _material(color: Color) -> SpatialMaterial:
	var material := SpatialMaterial.new()
	material.flags_unshaded = true
	material.albedo_color = color
	return material


# A new episode: the agent somewhere in the room facing anywhere, and every target placed anew; with
# `ahead` the agent faces the room's centre and the first target is straight in front of it.
func new_episode(ahead: bool) -> void:
	var start := Vector3(_coordinate(), 0, _coordinate())
	var heading := rng.randf_range(-PI, PI)
	if ahead:  # facing the room's centre, so the target in front is inside the walls
		heading = atan2(start.x, start.z)
	player.transform = Transform(Basis(Vector3.UP, heading), start)
	for target in targets:
		target.translation = Vector3(0, -100, 0)  # out of the way while the others are placed
	for k in range(TARGETS):
		if k == 0 and ahead:
			var forward: Vector3 = -player.transform.basis.z
			targets[0].translation = Vector3(0, TARGET_HEIGHT, 0) + start + forward * AHEAD_DISTANCE
		else:
			place(targets[k])


# Moves a target to a random free place: away from the agent and from the other targets (a bounded
# number of tries; the last one stands even when it is close).
func place(target: MeshInstance) -> void:
	var at := Vector3.ZERO
	for _try in range(20):
		at = Vector3(_coordinate(), TARGET_HEIGHT, _coordinate())
		if _is_free(target, at):
			break
	target.translation = at


func _is_free(target: MeshInstance, at: Vector3) -> bool:
	if _flat(at - player.translation).length() < TARGET_CLEARANCE:
		return false
	for other in targets:
		if other != target and _flat(at - other.translation).length() < TARGET_CLEARANCE:
			return false
	return true


func _coordinate() -> float:
	return rng.randf_range(-HALF + WALL_MARGIN, HALF - WALL_MARGIN)


static func _flat(v: Vector3) -> Vector2:
	return Vector2(v.x, v.z)
