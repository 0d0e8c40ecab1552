extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of a forager agent; it also moves the agent's body and scores each frame.
#
# Observation: what the agent's camera sees, 36 x 36 RGB ("camera_2d", camera_sensor_3d.gd, at its eyes),
# and its own velocity in its own frame ("obs": forward and sideways speed over MAX_SPEED, turning rate
# over TURN_SPEED). With the parameter vision=0 (--env_param=vision=0: the vector baseline) there is no
# camera: "obs" holds the velocity, then each target's position relative to the agent (x right, z back,
# over the room's half side), nearest first. The choice is made at the first episode and kept.
# Action: "move", discrete: 0 walks forward, 1 turns left, 2 turns right.
# Reward: +1 for each target touched (it appears again somewhere else). An episode lasts 30 s of game time.

const Room = preload("res://games/forager/room.gd")
const CameraSensor3D = preload("res://addons/rl_sync/camera_sensor_3d.gd")

const MAX_SPEED := 4.0
const TURN_SPEED := 2.5
const EYE_HEIGHT := 0.7
const BODY_RADIUS := 0.4
const BODY_LAYER := 2  # the render layer of the agents' bodies (room.tscn)
const PARAMS := {
	# 1: the agent sees through its camera; 0: it is told where the targets are (the vector baseline).
	# Fixed: it decides the observation space, so it is read once, at the first episode (--env_param).
	"vision": {"default": 1.0, "min": 0.0, "max": 1.0, "fixed": true},
	# The chance that an episode starts with a target straight ahead (a first lesson for a curriculum).
	"target_ahead": {"default": 0.0, "min": 0.0, "max": 1.0},
}

var velocity := Vector3.ZERO
var move := 0
var collected := 0
# Whether this agent sees (null until its first episode decides it), and its camera then.
var vision = null
var camera = null

onready var room = get_parent().get_parent()
onready var body: KinematicBody = get_parent()


func get_env_params() -> Dictionary:
	return PARAMS


func get_obs():
	var basis := body.transform.basis
	var own: Vector3 = basis.xform_inv(velocity)
	var obs := [own.x / MAX_SPEED, -own.z / MAX_SPEED, _turn_rate()]
	if vision:
		return {"obs": obs, "camera_2d": camera.get_frame()}
	var seen := []
	for target in room.targets:
		seen.append(basis.xform_inv(target.translation - body.translation) / Room.HALF)
	seen.sort_custom(self, "_nearer")
	for v in seen:
		obs.append(clamp(v.x, -2.0, 2.0))
		obs.append(clamp(v.z, -2.0, 2.0))
	return obs


func _nearer(a: Vector3, b: Vector3) -> bool:
	return Vector2(a.x, a.z).length_squared() < Vector2(b.x, b.z).length_squared()


func get_obs_space() -> Dictionary:
	if vision:
		return {"obs": {"size": [3], "space": "box"}, "camera_2d": camera.obs_space()}
	return {"obs": {"size": [3 + 2 * Room.TARGETS], "space": "box"}}


func get_action_space() -> Dictionary:
	return {"move": {"size": 3, "action_type": "discrete"}}


func set_action(action: Dictionary) -> void:
	move = int(action["move"])


func get_heuristic_action() -> Dictionary:
	if Input.is_key_pressed(KEY_LEFT) or Input.is_key_pressed(KEY_A):
		return {"move": 1}
	if Input.is_key_pressed(KEY_RIGHT) or Input.is_key_pressed(KEY_D):
		return {"move": 2}
	return {"move": 0}


func reset_episode() -> void:
	if vision == null:
		_choose_vision(env_param("vision") >= 0.5)
	var ahead := env_param("target_ahead")
	room.new_episode(ahead >= 1.0 or (ahead > 0.0 and room.rng.randf() < ahead))
	velocity = Vector3.ZERO
	move = 0
	collected = 0


func _choose_vision(sees: bool) -> void:
	vision = sees
	if sees:
		camera = CameraSensor3D.new()
		camera.name = "Camera"
		camera.fov = 90.0
		camera.far = 20.0
		camera.cull_mask = 0xFFFFF & ~BODY_LAYER  # not the inside of its own body
		camera.translation = Vector3(0, EYE_HEIGHT, 0)
		body.add_child(camera)


func get_info() -> Dictionary:
	return {"targets": collected}


func _turn_rate() -> float:
	return 1.0 if move == 1 else (-1.0 if move == 2 else 0.0)


func _physics_process(delta: float) -> void:
	body.rotate_y(_turn_rate() * TURN_SPEED * delta)
	var forward: Vector3 = -body.transform.basis.z
	velocity = forward * MAX_SPEED if move == 0 else Vector3.ZERO
	velocity = body.move_and_slide(velocity, Vector3.UP)
	velocity.y = 0.0
	body.translation.y = 0.0
	for target in room.targets:
		var offset: Vector3 = target.translation - body.translation
		if Vector2(offset.x, offset.z).length() < BODY_RADIUS + Room.TARGET_RADIUS:
			reward += 1.0
			collected += 1
			room.place(target)
