extends "res://addons/rl_sync/agent_controller.gd"
# The chaser of a Tag field (policy "chaser").
#
# Observation (6 values in [-1, 1]): its position, the vector to the runner, and the runner's last
# velocity, all over the field's size or speed.
# Action: "move", 2 continuous values in [-1, 1], its velocity as a fraction of its top speed.

var velocity := Vector2.ZERO

onready var field = get_parent()


func _init() -> void:
	policy_name = "chaser"


func get_obs() -> Array:
	var me: Vector2 = field.chaser_position / field.SIZE * 2.0 - Vector2.ONE
	var to_runner: Vector2 = (field.runner_position - field.chaser_position) / field.SIZE
	var runner_velocity: Vector2 = field.runner.velocity
	return [me.x, me.y, to_runner.x, to_runner.y, runner_velocity.x, runner_velocity.y]


func get_action_space() -> Dictionary:
	return {"move": {"size": 2, "action_type": "continuous"}}


func set_action(action: Dictionary) -> void:
	velocity = Vector2(clamp(action["move"][0], -1.0, 1.0), clamp(action["move"][1], -1.0, 1.0)).clamped(1.0)


func reset_episode() -> void:
	velocity = Vector2.ZERO
	field.reset_round()


func get_heuristic_action() -> Dictionary:
	var move := Vector2.ZERO
	if Input.is_key_pressed(KEY_A):
		move.x -= 1
	if Input.is_key_pressed(KEY_D):
		move.x += 1
	if Input.is_key_pressed(KEY_W):
		move.y -= 1
	if Input.is_key_pressed(KEY_S):
		move.y += 1
	return {"move": [move.x, move.y]}
