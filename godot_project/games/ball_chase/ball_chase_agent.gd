extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of a BallChase agent; it also moves the agent's body and scores each frame.
#
# Observation (12 values in [-1, 1]): 8 wall rays (1 = touching, 0 = nothing within reach), the
# vector to the fruit divided by the arena size, and the agent's velocity divided by its top speed.
# Action: "move", 2 continuous values in [-1, 1], the velocity as a fraction of the top speed.
# Reward: +1 per fruit, -1 and the episode ends on touching a wall, plus potential-based shaping
# that pays for getting closer to the fruit (it sums to the change in distance, so it cannot be
# farmed by moving back and forth).

const AGENT_RADIUS := 12.0
const MAX_SPEED := 300.0
const FRUIT_REWARD := 1.0
const WALL_PENALTY := -1.0
const SHAPING_SCALE := 1.0

var velocity := Vector2.ZERO
var _distance_to_fruit := 0.0

onready var arena = get_parent().get_parent()
onready var body: KinematicBody2D = get_parent()
onready var sensor = $"../RaycastSensor"


func get_obs() -> Array:
	var obs: Array = sensor.get_observation()
	var to_fruit: Vector2 = (arena.fruit_position - body.position) / arena.SIZE
	obs.append(to_fruit.x)
	obs.append(to_fruit.y)
	obs.append(velocity.x / MAX_SPEED)
	obs.append(velocity.y / MAX_SPEED)
	return obs


func get_action_space() -> Dictionary:
	return {"move": {"size": 2, "action_type": "continuous"}}


func set_action(action: Dictionary) -> void:
	var move := Vector2(clamp(action["move"][0], -1.0, 1.0), clamp(action["move"][1], -1.0, 1.0))
	velocity = move.clamped(1.0) * MAX_SPEED


func reset_episode() -> void:
	velocity = Vector2.ZERO
	body.position = arena.random_point(arena.SPAWN_MARGIN + AGENT_RADIUS)
	arena.respawn_fruit()
	_distance_to_fruit = body.position.distance_to(arena.fruit_position)


func get_heuristic_action() -> Dictionary:
	var move := Vector2.ZERO
	if Input.is_key_pressed(KEY_LEFT) or Input.is_key_pressed(KEY_A):
		move.x -= 1
	if Input.is_key_pressed(KEY_RIGHT) or Input.is_key_pressed(KEY_D):
		move.x += 1
	if Input.is_key_pressed(KEY_UP) or Input.is_key_pressed(KEY_W):
		move.y -= 1
	if Input.is_key_pressed(KEY_DOWN) or Input.is_key_pressed(KEY_S):
		move.y += 1
	return {"move": [move.x, move.y]}


func _physics_process(delta: float) -> void:
	if done:
		return
	if body.move_and_collide(velocity * delta) != null:
		reward += WALL_PENALTY
		done = true
		velocity = Vector2.ZERO
		return
	var distance := body.position.distance_to(arena.fruit_position)
	reward += SHAPING_SCALE * (_distance_to_fruit - distance) / arena.SIZE
	if distance < AGENT_RADIUS + arena.FRUIT_RADIUS:
		reward += FRUIT_REWARD
		arena.respawn_fruit()
		distance = body.position.distance_to(arena.fruit_position)
	_distance_to_fruit = distance
