extends "res://addons/rl_sync/agent_controller.gd"
# A controller with a trivial world, for testing the sync node's bookkeeping.

var position := 0.0
var resets := 0
var last_action := {}
# Returned by get_info() itself, not a copy, and cleared on reset, as a stateful controller might.
var info := {}


func get_obs() -> Array:
	return [position, float(resets)]


func get_action_space() -> Dictionary:
	return {"move": {"size": 2, "action_type": "continuous"}, "jump": {"size": 3, "action_type": "discrete"}}


func set_action(action: Dictionary) -> void:
	last_action = action


func reset_episode() -> void:
	position = 0.0
	resets += 1
	info.clear()


func get_info() -> Dictionary:
	return info
