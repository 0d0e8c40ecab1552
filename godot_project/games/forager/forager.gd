extends Spatial
# Forager: in each room an agent looks for bright targets and walks into them, seeing only through its
# camera (36 x 36 RGB) and feeling its own velocity; or, with --env_param=vision=0, told where they are.
#
# One instance simulates --agents independent rooms (default 16 when training, 1 for human play), laid
# out in a grid far enough apart that no camera sees another room (the walls are closed and higher than
# the eyes). Nothing that simulates is ever scaled or moved to fit the window: the window's camera frames
# the rooms (one room: from above and behind its agent; several: from above the grid).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Room = preload("res://games/forager/room.tscn")
# The 2D arena grid's reading of --agents (the layout here is 3D, so it is not the scene's script).
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")
const Agent = preload("res://games/forager/forager_agent.gd")

const ROOM_PITCH := 40.0
const FOLLOW_BACK := 6.0
const FOLLOW_UP := 7.0

# How many rooms to build; 0 reads --agents (the tests set it).
var n_agents := 0
var rooms := []

onready var camera: Camera = $Camera


func _ready() -> void:
	var agents_arg = ArenaGrid.requested_agents(get_tree(), n_agents)
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	n_agents = agents_arg
	var columns := int(ceil(sqrt(n_agents)))
	for i in range(n_agents):
		var room = Room.instance()
		room.index = i
		room.seed_value = seed_value
		room.translation = Vector3(i % columns, 0, i / columns) * ROOM_PITCH
		add_child(room)
		rooms.append(room)
	set_process(not RlArgs.is_headless() and n_agents == 1)
	if not RlArgs.is_headless():
		camera.current = true
		if n_agents > 1:
			var rows := int(ceil(n_agents / float(columns)))
			var centre := Vector3(columns - 1, 0, rows - 1) * ROOM_PITCH / 2.0
			var span: float = max(columns, rows) * ROOM_PITCH
			camera.look_at_from_position(centre + Vector3(0, 1.0, 0.5).normalized() * span, centre, Vector3.UP)


# The parameters its rooms' controllers declare (built in _ready): so --list_envs, which instances this
# scene without running it, finds them.
func get_env_params() -> Dictionary:
	return Agent.PARAMS


func _process(_delta: float) -> void:
	# One room: the window looks over its agent's shoulder (the camera only draws).
	var player: KinematicBody = rooms[0].player
	var back: Vector3 = player.global_transform.basis.z
	var eye := player.global_transform.origin + back * FOLLOW_BACK + Vector3.UP * FOLLOW_UP
	camera.look_at_from_position(eye, player.global_transform.origin - back * 2.0, Vector3.UP)
