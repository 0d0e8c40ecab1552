extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of a Jumper agent; it also moves the agent's body and scores each frame.
#
# Observation (26 values, each in [-1, 1]): the 3D raycast sensor's 16 rays (a fan of 5 directions
# at 3 downward angles, then straight down: they show where the platforms' edges are), the goal's
# and the next platform's position relative to the agent (in its own frame: x right, y up, z back;
# divided by 20 m and 10 m), its velocity in its own frame (divided by its top speeds) and whether
# it stands on a floor.
# Actions: "move", 2 continuous values in [-1, 1]: walking speed (forward > 0, backward at half
# speed) and turning rate; "jump", discrete: 0 stays, 1 jumps (when standing on a floor).
# Reward: +GOAL_REWARD on reaching the goal platform (a new course then starts from it), -1 and the
# end of the episode for falling off, plus potential-based shaping that pays for getting closer to
# the goal (it sums to the change in distance, so it cannot be farmed by moving back and forth).

const ArenaScript = preload("res://games/jumper/arena.gd")

const MAX_SPEED := 6.0
const BACKWARD_FRACTION := 0.5
const TURN_SPEED := 3.0
const JUMP_SPEED := 7.0
const GRAVITY := 20.0
const GOAL_REWARD := 2.0
const FALL_PENALTY := -1.0
const SHAPING_PER_METRE := 0.1
const GOAL_SCALE := 20.0
const NEXT_SCALE := 10.0

var velocity := Vector3.ZERO
var move := 0.0
var turn := 0.0
var jump := false
# Goals reached in this episode, and the course platform the agent last stood on.
var goals := 0
var stage := 0
var _distance_to_goal := 0.0

onready var arena = get_parent().get_parent()
onready var body: KinematicBody = get_parent()
onready var sensor = $"../RaycastSensor"


func get_obs() -> Array:
	var obs: Array = sensor.get_observation()
	var basis := body.transform.basis
	var to_goal: Vector3 = basis.xform_inv(arena.top_centre(arena.COURSE_PLATFORMS - 1) - body.translation) / GOAL_SCALE
	var next_k: int = min(stage + 1, arena.COURSE_PLATFORMS - 1)
	var to_next: Vector3 = basis.xform_inv(arena.top_centre(next_k) - body.translation) / NEXT_SCALE
	var v: Vector3 = basis.xform_inv(velocity)
	for value in [to_goal.x, to_goal.y, to_goal.z, to_next.x, to_next.y, to_next.z,
			v.x / MAX_SPEED, v.y / JUMP_SPEED, v.z / MAX_SPEED]:
		obs.append(clamp(value, -1.0, 1.0))
	obs.append(1.0 if body.is_on_floor() else 0.0)
	return obs


func get_action_space() -> Dictionary:
	return {
		"move": {"size": 2, "action_type": "continuous"},
		"jump": {"size": 2, "action_type": "discrete"},
	}


func set_action(action: Dictionary) -> void:
	move = clamp(action["move"][0], -1.0, 1.0)
	turn = clamp(action["move"][1], -1.0, 1.0)
	jump = action["jump"] == 1


func get_env_params() -> Dictionary:
	return ArenaScript.COURSE_PARAMS


func reset_episode() -> void:
	for name in ArenaScript.COURSE_PARAMS:
		arena.course[name] = env_param(name)
	arena.new_course()
	body.transform = Transform(Basis(Vector3.UP, arena.rng.randf_range(-PI, PI)), arena.top_centre(0))
	velocity = Vector3.ZERO
	move = 0.0
	turn = 0.0
	jump = false
	goals = 0
	stage = 0
	_distance_to_goal = _horizontal_distance_to_goal()


func get_info() -> Dictionary:
	return {"goals": goals, "reached_goal": 1 if goals > 0 else 0}


func get_heuristic_action() -> Dictionary:
	var forward := 0.0
	var rotate := 0.0
	if Input.is_key_pressed(KEY_UP) or Input.is_key_pressed(KEY_W):
		forward += 1.0
	if Input.is_key_pressed(KEY_DOWN) or Input.is_key_pressed(KEY_S):
		forward -= 1.0
	if Input.is_key_pressed(KEY_LEFT) or Input.is_key_pressed(KEY_A):
		rotate += 1.0
	if Input.is_key_pressed(KEY_RIGHT) or Input.is_key_pressed(KEY_D):
		rotate -= 1.0
	return {"move": [forward, rotate], "jump": 1 if Input.is_key_pressed(KEY_SPACE) else 0}


func _physics_process(delta: float) -> void:
	if done:
		return
	body.rotate_y(turn * TURN_SPEED * delta)
	var speed := move * MAX_SPEED * (1.0 if move >= 0.0 else BACKWARD_FRACTION)
	var forward: Vector3 = -body.transform.basis.z
	velocity.x = forward.x * speed
	velocity.z = forward.z * speed
	velocity.y -= GRAVITY * delta
	var grounded := body.is_on_floor()
	if jump and grounded:
		velocity.y = JUMP_SPEED
	velocity = body.move_and_slide(velocity, Vector3.UP, true)
	if body.translation.y < arena.fall_y:
		reward += FALL_PENALTY
		done = true
		velocity = Vector3.ZERO
		return
	if body.is_on_floor():
		for k in range(stage + 1, arena.COURSE_PLATFORMS):
			if arena.is_on(k, body.translation):
				stage = k
		if stage == arena.COURSE_PLATFORMS - 1:
			reward += GOAL_REWARD + SHAPING_PER_METRE * _distance_to_goal
			goals += 1
			arena.next_course()
			stage = 0
			_distance_to_goal = _horizontal_distance_to_goal()
			return
	var distance := _horizontal_distance_to_goal()
	reward += SHAPING_PER_METRE * (_distance_to_goal - distance)
	_distance_to_goal = distance


func _horizontal_distance_to_goal() -> float:
	var to_goal: Vector3 = arena.top_centre(arena.COURSE_PLATFORMS - 1) - body.translation
	return Vector2(to_goal.x, to_goal.z).length()
