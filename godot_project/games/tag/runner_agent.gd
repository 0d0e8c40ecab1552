extends "res://addons/rl_sync/agent_controller.gd"
# The runner of a Tag field (policy "runner").
#
# Observation (8 values in [-1, 1]): its position, the vector from the chaser, the chaser's last
# velocity, and how close the nearest wall is on each axis (1: touching).
# Action: "move", discrete: 0 stay, 1 up, 2 down, 3 left, 4 right, at its top speed.

const DIRECTIONS := [Vector2.ZERO, Vector2.UP, Vector2.DOWN, Vector2.LEFT, Vector2.RIGHT]

var velocity := Vector2.ZERO

onready var field = get_parent()


func _init() -> void:
	policy_name = "runner"


func get_obs() -> Array:
	var me: Vector2 = field.runner_position / field.SIZE * 2.0 - Vector2.ONE
	var from_chaser: Vector2 = (field.runner_position - field.chaser_position) / field.SIZE
	var chaser_velocity: Vector2 = field.chaser.velocity
	return [me.x, me.y, from_chaser.x, from_chaser.y, chaser_velocity.x, chaser_velocity.y, abs(me.x), abs(me.y)]


func get_action_space() -> Dictionary:
	return {"move": {"size": 5, "action_type": "discrete"}}


func set_action(action: Dictionary) -> void:
	velocity = DIRECTIONS[int(action["move"])]


func reset_episode() -> void:
	velocity = Vector2.ZERO
	field.reset_round()


func get_heuristic_action() -> Dictionary:
	for k in range(1, DIRECTIONS.size()):
		if Input.is_key_pressed([KEY_UP, KEY_DOWN, KEY_LEFT, KEY_RIGHT][k - 1]):
			return {"move": k}
	return {"move": 0}
