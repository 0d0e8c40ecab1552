extends "res://addons/rl_sync/agent_controller.gd"
# A starting point for your agent's controller: copy this file next to your game, rename it, and fill
# in each method. Put the node (a plain Node) inside your agent's scene, for example as a child of
# its body; RLSync finds it by itself. See README.md in this folder for when each method is called.
#
# While the game runs (in _physics_process, on collisions, ...):
#   reward += x      for anything good (x > 0) or bad (x < 0) that just happened
#   done = true      when the episode ends by success or failure; never reset the episode yourself:
#                    RLSync calls reset_episode() at the next decision step
# The time limit is max_episode_steps (an export var; --max_episode_steps overrides it).


# The agent's observation: a flat Array of numbers, the same length every step, ideally in [-1, 1]
# (divide distances by the arena size, speeds by the top speed). Called once per decision step,
# after the reward is collected, and again right after a reset.
func get_obs() -> Array:
	return []


# The actions the agent takes, in godot-rl's schema; called once at start, so keep it constant:
#   {"move": {"size": 2, "action_type": "continuous"}}   an Array of `size` floats in [-1, 1]
#   {"jump": {"size": 3, "action_type": "discrete"}}     an int in [0, size)
# Several keys are allowed.
func get_action_space() -> Dictionary:
	return {"move": {"size": 2, "action_type": "continuous"}}


# Applies one action, a Dictionary with one value per key of get_action_space(). Called once per
# decision step, before that physics frame's _physics_process: store the action and let your physics
# code use it; it holds until the next decision (--action_repeat frames).
func set_action(action: Dictionary) -> void:
	pass


# Puts the agent's world back to a starting state: positions, velocities, spawned items, counters
# behind get_info(). Called through begin_episode() at start, on a trainer's reset, and in the same
# decision step in which an episode ends (RLSync clears reward, done and n_steps itself).
func reset_episode() -> void:
	pass


# Optional: the action of a person at the keyboard, used when no trainer and no policy drive the game.
# The default is zero_action().
func get_heuristic_action() -> Dictionary:
	return zero_action()


# Optional: extra per-agent values for the step's info. On the step where an episode ends it is
# called before reset_episode(), so it describes the ended episode; our trainer logs its numeric
# values of ended episodes to TensorBoard as episode_info/<key>. Keep it {} if you need nothing: it is
# sent every step.
func get_info() -> Dictionary:
	return {}


# Optional: the observation space; the default is a box of get_obs().size() values.
func get_obs_space() -> Dictionary:
	return {"obs": {"size": [get_obs().size()], "space": "box"}}


# Optional: the game's environment parameters, numbers a trainer sets per episode (a difficulty, a
# size), each with a default and a range, e.g. {"gap_max": {"default": 2.2, "min": 0.2, "max": 4.0}};
# return the same constant Dictionary every time. Read a value in reset_episode() with
# env_param("gap_max"). See docs/env_params.md.
func get_env_params() -> Dictionary:
	return {}
