extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of one cart: gymnasium's CartPole-v1 as an agent of the rl_sync addon.
#
# Observation: [x, x_dot, theta, theta_dot], unnormalised, as gymnasium gives them; their bounds go
# to the trainer in the observation space ("low"/"high", our extension: godot-rl's client assumes
# [-1, 1] and ignores the two keys).
# Action: "push", discrete with 2 choices: 0 pushes the cart left, 1 right, with 10 N.
# Reward: 1 per step, the step that ends the episode included. The episode ends when the cart
# leaves [-2.4, 2.4] or the pole leans more than 12 degrees; the time limit (max_episode_steps in
# the scene) is 500 steps, as CartPole-v1's. One physics frame is one gymnasium step of 0.02 s.
#
# For parity checks a trainer can read and set the exact state through godot-rl's "call" (see
# get_state_f64 and set_state): JSON numbers would keep only 6 digits of it.

const Physics = preload("res://games/cart_pole/cart_pole_physics.gd")

const ACTION_KEY := "push"

# [x, x_dot, theta, theta_dot], float64.
var state := [0.0, 0.0, 0.0, 0.0]
var action := 0
# Human play without a key pressed: the pushes alternate, so the cart gets no net push.
var _idle_push := 0

onready var cart = get_parent()


func get_obs() -> Array:
	return state.duplicate()


func get_obs_space() -> Dictionary:
	var high := Physics.observation_high()
	var low := []
	for value in high:
		low.append(-value if value != null else null)
	return {"obs": {"size": [4], "space": "box", "low": low, "high": high}}


func get_action_space() -> Dictionary:
	return {ACTION_KEY: {"size": 2, "action_type": "discrete"}}


func set_action(new_action: Dictionary) -> void:
	action = int(new_action[ACTION_KEY])


func reset_episode() -> void:
	state = Physics.random_state(cart.rng)


func get_heuristic_action() -> Dictionary:
	if Input.is_key_pressed(KEY_LEFT) or Input.is_key_pressed(KEY_A):
		return {ACTION_KEY: 0}
	if Input.is_key_pressed(KEY_RIGHT) or Input.is_key_pressed(KEY_D):
		return {ACTION_KEY: 1}
	_idle_push = 1 - _idle_push
	return {ACTION_KEY: _idle_push}


func _physics_process(_delta: float) -> void:
	if done:
		return
	state = Physics.step(state, action)
	reward += 1.0
	done = Physics.is_terminal(state)


# Asked for on the step that ends an episode (before the reset): the ended episode's exact last state.
func get_info() -> Dictionary:
	return {"state_f64": get_state_f64()}


# The exact state: base64 of the four float64 values, little-endian, in the order of `state`.
func get_state_f64() -> String:
	var buffer := StreamPeerBuffer.new()
	for value in state:
		buffer.put_double(value)
	return Marshalls.raw_to_base64(buffer.data_array)


# Replaces the state of the running episode (right after a reset: the episode starts from it).
# `new_state`: 4 numbers, or get_state_f64()'s base64 text for the exact bits. Returns "" or what is
# wrong with it.
func set_state(new_state) -> String:
	var values := []
	if typeof(new_state) == TYPE_STRING:
		var buffer := StreamPeerBuffer.new()
		buffer.data_array = Marshalls.base64_to_raw(new_state)
		if buffer.get_size() != 32:
			return "set_state: expected the base64 of 4 float64 values (32 bytes), got %d bytes" % buffer.get_size()
		for _i in range(4):
			values.append(buffer.get_double())
	elif typeof(new_state) == TYPE_ARRAY and new_state.size() == 4:
		for value in new_state:
			if typeof(value) != TYPE_REAL and typeof(value) != TYPE_INT:
				return "set_state: expected 4 numbers, got %s" % str(new_state)
			values.append(float(value))
	else:
		return "set_state: expected 4 numbers [x, x_dot, theta, theta_dot] or a base64 text, got %s" % str(new_state)
	state = values
	done = Physics.is_terminal(state)
	return ""
