extends "res://addons/rl_sync/agent_controller.gd"
# One Pong paddle. Both paddles of a court train as one policy ("pong") in two teams (0: left,
# 1: right), so each sees the court from its own side: x is measured from its own goal line, and the
# observation of a right paddle is the mirror image of a left paddle's.
#
# Observation (6 values in [-1, 1]): its paddle's height, the opponent's, the ball's distance from
# its own goal line and height, and the ball's velocity (towards the opponent positive).
# Action: "move", discrete: 0 up, 1 stay, 2 down.
# Reward: +1 for a point won, -1 for a point lost (the match ends either way); a draw at the time limit.
#
# The scripted opponent (get_scripted_action(), --opponent=scripted): it follows the ball's height as
# it was SCRIPTED_DELAY physics frames ago, at most SCRIPTED_SPEED px/s, and stays when that height is
# within SCRIPTED_DEAD_ZONE px of its paddle's centre. Its delay counts frames, not decision steps,
# so it is the same opponent whatever the decision rate.

# A reaction time of 0.1 s (physics runs at 60 frames per second).
const SCRIPTED_DELAY := 6
# 80% of a paddle's full speed (court.gd's PADDLE_SPEED, 300 px/s).
const SCRIPTED_SPEED := 240.0
const SCRIPTED_DEAD_ZONE := 8.0

var move := 0.0  # -1 up, 0 stay, +1 down: read by the court every physics frame

# The scripted opponent's memory: the ball's heights it saw this match and the physics frames it saw
# them in (back to the newest one at least SCRIPTED_DELAY frames old), and its speed budget (a move
# costs 1 decision step; it earns SCRIPTED_SPEED / PADDLE_SPEED per step).
var _seen_ball_y := []
var _seen_frames := []
var _budget := 0.0

onready var court = get_parent()


func _init() -> void:
	policy_name = "pong"


func get_obs() -> Array:
	var mine: float = court.paddle_y[team]
	var theirs: float = court.paddle_y[1 - team]
	var x: float = court.ball.x if team == 0 else court.WIDTH - court.ball.x
	var vx: float = court.ball_velocity.x if team == 0 else -court.ball_velocity.x
	return [
		mine / court.HEIGHT * 2.0 - 1.0,
		theirs / court.HEIGHT * 2.0 - 1.0,
		x / court.WIDTH * 2.0 - 1.0,
		court.ball.y / court.HEIGHT * 2.0 - 1.0,
		vx / court.MAX_BALL_SPEED,
		court.ball_velocity.y / court.MAX_BALL_SPEED,
	]


func get_action_space() -> Dictionary:
	return {"move": {"size": 3, "action_type": "discrete"}}


func set_action(action: Dictionary) -> void:
	move = float(int(action["move"]) - 1)


func reset_episode() -> void:
	move = 0.0
	court.reset_match()
	_seen_ball_y.clear()
	_seen_frames.clear()
	_budget = 1.0  # a paddle that waited can move at once


# Keyboard play for either side, through the game's input actions (project.godot's Input Map): the left
# paddle with W / S (pong_left_up, pong_left_down), the right one with the up / down arrows.
# get_input_actions(): the actions this paddle reads, up then down (play --opponent human shows their keys).
func get_input_actions() -> Array:
	var side := "left" if team == 0 else "right"
	return ["pong_%s_up" % side, "pong_%s_down" % side]


func get_heuristic_action() -> Dictionary:
	var actions := get_input_actions()
	var choice := 1
	if Input.is_action_pressed(actions[0]):
		choice = 0
	elif Input.is_action_pressed(actions[1]):
		choice = 2
	return {"move": choice}


# The scripted opponent's action: towards where the ball was SCRIPTED_DELAY frames ago (before that,
# in a new match, it stays), no faster on average than SCRIPTED_SPEED. Deterministic: it draws from
# no generator, so it changes nothing in the court's matches but its own paddle.
func get_scripted_action() -> Dictionary:
	var now: int = court.frames
	_seen_ball_y.append(court.ball.y)
	_seen_frames.append(now)
	if now - _seen_frames[0] < SCRIPTED_DELAY:
		return {"move": 1}
	while now - _seen_frames[1] >= SCRIPTED_DELAY:
		_seen_ball_y.pop_front()
		_seen_frames.pop_front()
	var target: float = _seen_ball_y[0]
	# What an idle paddle saves is capped, so that its speed over any few steps stays near the limit.
	var rate: float = SCRIPTED_SPEED / court.PADDLE_SPEED
	_budget = min(_budget + rate, 1.0 + rate)
	var gap: float = target - court.paddle_y[team]
	if abs(gap) <= SCRIPTED_DEAD_ZONE or _budget < 1.0:
		return {"move": 1}
	_budget -= 1.0
	return {"move": 0 if gap < 0.0 else 2}
