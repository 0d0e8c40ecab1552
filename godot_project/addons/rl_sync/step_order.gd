extends Reference
# The order of a decision step in which an episode ends, so that a reset cannot race the game's
# deferred calls.
#
# Godot games end things the deferred way: a hit seen in a physics callback disables a collision
# shape with set_deferred() ("can't change this state while flushing queries"), frees an enemy with
# queue_free(), or emits a signal connected with CONNECT_DEFERRED. Those run at the end of the
# physics frame, after every _physics_process, so a reset in the decision step that sees the end
# (the sync node's _physics_process, the first of the frame) would run before them: the hit's
# set_deferred("disabled", true) would undo the reset's `disabled = false`, and the agent could not
# be hit for its whole next episode. Instead the decision step of an ending episode takes three
# physics frames, with the scene tree paused after the first so nothing of the game simulates:
#   frame 1 (ENDING): the episode's last frame was simulated; the game's deferred calls and queued
#                     frees run at its end;
#   frame 2 (RESET):  the step's bookkeeping and the resets (DecisionStep.close()); the resets' own
#                     deferred calls, queued frees and transform notifications run at its end;
#   frame 3:          the tree runs again, the observations are taken (the first get_frame() of a
#                     camera sensor draws every sensor now, camera_frames.gd) and the reply goes out;
#                     the trainer's action moves the agents in this frame.
# The paused frames simulate nothing and count no step, so a game that defers nothing runs exactly
# as it would have with an immediate reset (same-seed runs are unchanged). Decision steps in which
# no episode ends take one frame, as before.

const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")

enum Phase { RUNNING, RESET, REPLY }

var _phase: int = Phase.RUNNING
# What the tree's pause was before we paused it (a game may pause itself); restored at the reply.
var _game_paused := false
# The bookkeeping done in the RESET frame, for the reply (DecisionStep.close()), or null.
var _closed = null


# Whether a decision step is under way over several frames (the tree is paused).
func is_settling() -> bool:
	return _phase != Phase.RUNNING


# At a decision frame: true when an episode ends in it, after pausing the tree so that the game's
# deferred calls run before the reset; the decision step then goes on in the next frames (advance()).
func hold(tree: SceneTree, agents: Array) -> bool:
	if not DecisionStep.any_ending(agents):
		return false
	_game_paused = tree.paused
	tree.paused = true
	_phase = Phase.RESET
	return true


# In a frame after hold(): true when the reply is due now (the tree runs again). The RESET frame
# closes the step and resets the ended agents, and returns false.
func advance(tree: SceneTree, agents: Array) -> bool:
	if _phase == Phase.RESET:
		_closed = DecisionStep.close(agents)
		# A reset may unpause the tree (a game's new_game() often does): keep it paused one more
		# frame, and leave it as the reset wanted at the reply.
		_game_paused = _game_paused and tree.paused
		tree.paused = true
		_phase = Phase.REPLY
		return false
	tree.paused = _game_paused
	_phase = Phase.RUNNING
	return true


# Pauses the tree for the rest of this frame and the next, whose first physics call is the reply (a
# trainer's reset seen by cameras: trainer_session.gd): the reset's transforms reach the VisualServer
# at the end of this frame, and the camera frames of the reply are drawn from them.
func settle(tree: SceneTree) -> void:
	_game_paused = tree.paused
	tree.paused = true
	_phase = Phase.REPLY


# The bookkeeping of the step being replied to (once), or null: the reply does it itself.
func take_closed():
	var closed = _closed
	_closed = null
	return closed
