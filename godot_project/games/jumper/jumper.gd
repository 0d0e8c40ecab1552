extends Spatial
# Jumper: in each arena an agent (a capsule) crosses a course of floating platforms to the goal
# platform, walking, turning and jumping the gaps.
#
# One instance simulates --agents independent arenas (default 16 when training, 1 for human play),
# laid out in a grid far enough apart that no ray or body of one can reach another. Nothing that
# simulates is ever scaled or moved to fit the window: the camera frames the arenas (one arena: it
# follows the agent from behind; several: it looks down on the grid).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Arena = preload("res://games/jumper/arena.tscn")
# The 2D arena grid's reading of --agents (the layout here is 3D, so it is not the scene's script).
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")
const ArenaScript = preload("res://games/jumper/arena.gd")

# Courses stay within about 40 m of their arena's origin and rays reach 8 m.
const ARENA_PITCH := 100.0
# What the grid view frames around each arena's origin (most courses stay within it).
const VIEW_RADIUS := 30.0
# The follow camera: this far behind and above the agent, looking a little ahead of it.
const FOLLOW_BACK := 8.0
const FOLLOW_UP := 6.0
const FOLLOW_AHEAD := 4.0
const FOLLOW_LAG := 4.0

# How many arenas to build; 0 reads --agents (the tests set it).
var n_agents := 0
var arenas := []

var _camera_placed := false

onready var camera: Camera = $Camera


func _ready() -> void:
	var agents_arg = ArenaGrid.requested_agents(get_tree(), n_agents)
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	n_agents = agents_arg
	var columns := int(ceil(sqrt(n_agents)))
	for i in range(n_agents):
		var arena = Arena.instance()
		arena.index = i
		arena.seed_value = seed_value
		arena.translation = Vector3(i % columns, 0, i / columns) * ARENA_PITCH
		add_child(arena)
		arenas.append(arena)
	# Headless nothing is drawn, so there is no camera to move.
	set_process(not RlArgs.is_headless())
	if not RlArgs.is_headless():
		camera.current = true
		_frame_grid(columns)


# The course's environment parameters (its arenas' controllers, built in _ready, declare the same): so
# --list_envs, which instances this scene without running it, finds them.
func get_env_params() -> Dictionary:
	return ArenaScript.COURSE_PARAMS


# Several arenas: a view from above and behind that holds the whole grid.
func _frame_grid(columns: int) -> void:
	if arenas.size() == 1:
		return
	var rows := int(ceil(arenas.size() / float(columns)))
	var centre := Vector3(columns - 1, 0, rows - 1) * ARENA_PITCH / 2.0
	var span: float = (max(columns, rows) - 1) * ARENA_PITCH + 2.0 * VIEW_RADIUS
	camera.look_at_from_position(centre + Vector3(0, 0.8, 0.6).normalized() * span / 1.1, centre, Vector3.UP)


func _process(delta: float) -> void:
	if arenas.size() != 1:
		return
	# One arena: follow the agent from behind, smoothly (the camera only draws).
	var player: KinematicBody = arenas[0].player
	var back: Vector3 = player.global_transform.basis.z
	back.y = 0.0
	back = back.normalized()
	var target := player.global_transform.origin + back * FOLLOW_BACK + Vector3.UP * FOLLOW_UP
	var weight: float = clamp(delta * FOLLOW_LAG, 0.0, 1.0)
	var eye := camera.global_transform.origin.linear_interpolate(target, weight)
	if not _camera_placed or eye.distance_to(target) > 30.0:  # the first frame, or a new episode far away
		eye = target
		_camera_placed = true
	camera.look_at_from_position(eye, player.global_transform.origin - back * FOLLOW_AHEAD, Vector3.UP)
