extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of a Memory agent, and the whole of its (turn-based) game.
#
# An episode: for the first CUE_STEPS decision steps the agent stands at the foot of a corridor and
# sees a cue, left or right; it cannot move. Then the cue goes dark and the agent walks up the
# corridor, one cell per decision step whatever it does (walls on both sides), until it stands at the
# junction. There, "left" or "right" makes the choice: +1 when it is the side the cue named, -1
# otherwise, and the episode ends. "forward" at the junction waits; the time limit ends a waiting agent
# with nothing.
#
# Why it needs memory: nothing observed after the cue depends on the cue (the walk is the same for
# both, and the position depends only on the step count), and CORRIDOR_CELLS decision steps separate
# the last cue observation from the earliest choice, so a policy without memory guesses at the
# junction: a mean return of 0. The episode is short (about 24 steps) so the choice's reward reaches
# the cue through few steps.
#
# Observation (4 values in [0, 1]): cue says left, cue says right (both 0 once it is dark), progress
# along the corridor (cell / CORRIDOR_CELLS), at the junction (1 or 0).
# Action: "move", discrete: 0 forward (or wait at the junction), 1 turn left, 2 turn right.
#
# The game advances in set_action(), once per decision step, so --action_repeat does not change how
# many decisions the corridor takes.

const CUE_STEPS := 2
const CORRIDOR_CELLS := 21
const FORWARD := 0
const LEFT := 1
const RIGHT := 2
const RIGHT_SIDE_REWARD := 1.0
const WRONG_SIDE_REWARD := -1.0

# -1: the cue says left; +1: right. Drawn at the start of each episode from the maze's generator.
var cue := 1
# Decision steps this episode has acted on (the cue is visible while it is below CUE_STEPS).
var steps_taken := 0
# The side chosen at the end of the last episode (-1, +1; 0 before any choice), for drawing.
var last_choice := 0
var last_cue := 0

onready var maze = get_parent()


func get_obs() -> Array:
	var shown := cue_visible()
	return [
		1.0 if shown and cue < 0 else 0.0,
		1.0 if shown and cue > 0 else 0.0,
		float(cell()) / CORRIDOR_CELLS,
		1.0 if at_junction() else 0.0,
	]


func get_action_space() -> Dictionary:
	return {"move": {"size": 3, "action_type": "discrete"}}


func cue_visible() -> bool:
	return steps_taken < CUE_STEPS


# The corridor cell the agent stands on: 0 at the foot (during the cue), CORRIDOR_CELLS at the junction.
func cell() -> int:
	return int(clamp(steps_taken - CUE_STEPS + 1, 0, CORRIDOR_CELLS))


func at_junction() -> bool:
	return cell() == CORRIDOR_CELLS


func set_action(action: Dictionary) -> void:
	if done:
		return
	var move := int(action["move"])
	if at_junction() and (move == LEFT or move == RIGHT):
		last_choice = -1 if move == LEFT else 1
		last_cue = cue
		reward += RIGHT_SIDE_REWARD if last_choice == cue else WRONG_SIDE_REWARD
		done = true
		return
	steps_taken += 1


func reset_episode() -> void:
	steps_taken = 0
	cue = -1 if maze.rng.randi() % 2 == 0 else 1


func get_heuristic_action() -> Dictionary:
	if Input.is_key_pressed(KEY_LEFT) or Input.is_key_pressed(KEY_A):
		return {"move": LEFT}
	if Input.is_key_pressed(KEY_RIGHT) or Input.is_key_pressed(KEY_D):
		return {"move": RIGHT}
	return {"move": FORWARD}
