extends Node
# The interface a game implements to make an agent trainable.
#
# Extend this script, implement the five methods under "Implement these", and put the node in your
# agent's scene. The RLSync node finds every controller through the "AGENT" group, in tree order, so
# agent i on the wire is the i-th controller in the scene tree.
#
# During play, add to `reward` whenever something good or bad happens and set `done = true` when the
# episode ends by success or failure. The sync node does the rest once per decision step: it collects
# and zeroes the reward, applies the time limit (`max_episode_steps`), and when the episode has ended
# it calls `begin_episode()` (and so `reset_episode()`), after the ending frame's deferred calls have
# run, so the observation it sends is the first one of the next episode. Never reset the episode
# yourself. See README.md in this folder ("The order of a decision step").

const AGENT_GROUP := "AGENT"

# Time limit in decision steps; the --max_episode_steps command-line setting overrides it.
export var max_episode_steps := 1000
# The policy that drives this agent: agents with the same name share one network, so they must have the
# same observation and action spaces; agents of different names are trained as different networks.
export var policy_name := "shared_policy"
# The side this agent plays on in a game of two sides (0, 1, ...), -1 for none: a self-play trainer
# plays one side's agents against snapshots of the same policy on the other.
export var team := -1

# Reward earned since the last decision step.
var reward := 0.0
# Set by the game when the episode ends by success or failure (not by the time limit).
var done := false
# Decision steps taken in the current episode (counted by the sync node).
var n_steps := 0
# Undiscounted return so far and of the last finished episode, for overlays.
var episode_return := 0.0
var last_episode_return := 0.0
var last_episode_length := 0
# The environment parameters in force for this episode (name -> float; see env_params.gd), set by the
# sync node just before reset_episode(); read them with env_param().
var env_values := {}
# The sync node's parameters and this agent's index among its agents (null without a sync node).
var _env_params = null
var _agent_index := 0


func _enter_tree() -> void:
	add_to_group(AGENT_GROUP)


# --- Implement these ---------------------------------------------------------------------------

# A flat Array of numbers, ideally each in [-1, 1].
func get_obs() -> Array:
	push_error("%s: get_obs() is not implemented" % get_path())
	return []


# godot-rl's action-space schema, for example {"move": {"size": 2, "action_type": "continuous"}}
# (continuous values in [-1, 1]) or {"turn": {"size": 3, "action_type": "discrete"}}.
func get_action_space() -> Dictionary:
	push_error("%s: get_action_space() is not implemented" % get_path())
	return {}


# Receives one action per key of get_action_space(): an Array of floats for a continuous key, an int
# for a discrete one.
func set_action(_action: Dictionary) -> void:
	push_error("%s: set_action() is not implemented" % get_path())


# Puts the agent's world back to a starting state for a new episode.
func reset_episode() -> void:
	push_error("%s: reset_episode() is not implemented" % get_path())


# The action a person at the keyboard chooses (human mode, no trainer and no policy).
func get_heuristic_action() -> Dictionary:
	return zero_action()


# The game's environment parameters, when it has any (this node's, or its scene root's, see
# env_params.gd): name -> {"default": D, "min": LO, "max": HI}, the same constant Dictionary every time.
func get_env_params() -> Dictionary:
	return {}


# Optional, and deliberately not defined here (RLSync asks has_method()): a game of two teams may give
# a hand-written opponent, played by --opponent=scripted (or --policy=scripted) in matches:
#     func get_scripted_action() -> Dictionary
# returns an action like get_heuristic_action()'s (see games/pong/pong_agent.gd). Likewise optional:
#     func get_input_actions() -> Array
# the names of the Input Map's actions get_heuristic_action() reads, whose keys --opponent=human shows.
# And:
#     func get_noop_action() -> Dictionary
# an action that does nothing, played by --policy_noop_max (train --eval-noop-max) at each evaluated
# episode's start for a random number of decisions (random actions without it).


# --- Provided ----------------------------------------------------------------------------------

func get_obs_space() -> Dictionary:
	return {"obs": {"size": [get_obs().size()], "space": "box"}}


# Extra per-agent data for the step's info dict (merged with the sync node's own keys). On the step
# where an episode ends it is asked before the reset, so it describes the ended episode; our trainer
# logs its numeric values of ended episodes to TensorBoard as episode_info/<key>.
func get_info() -> Dictionary:
	return {}


func zero_action() -> Dictionary:
	var action := {}
	var space := get_action_space()
	for key in space:
		if space[key]["action_type"] == "discrete":
			action[key] = 0
		else:
			var values := []
			for _i in range(int(space[key]["size"])):
				values.append(0.0)
			action[key] = values
	return action


# The value of an environment parameter for this episode: a trainer's or --env_param's, else its
# default. Read it in reset_episode(); reading draws nothing from any random generator.
func env_param(name: String) -> float:
	if env_values.has(name):
		return env_values[name]
	var declared := get_env_params()  # no sync node (a test): this controller's own declaration
	if declared.has(name):
		return float(declared[name]["default"])
	push_error("%s: env_param('%s'): the game declares no such parameter (get_env_params())" % [get_path(), name])
	return 0.0


# Called by the sync node (never by the game): the parameters this agent's episodes read.
func use_env_params(params, agent_index: int) -> void:
	_env_params = params
	_agent_index = agent_index


# Called by the sync node (never by the game): starts a fresh episode.
func begin_episode() -> void:
	if _env_params != null:
		env_values = _env_params.for_agent(_agent_index)
	reset_episode()
	reward = 0.0
	done = false
	n_steps = 0
	episode_return = 0.0
