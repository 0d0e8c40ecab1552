extends "res://tests/test_case.gd"
# Pong's scripted opponent (pong_agent.gd's get_scripted_action()): its reaction delay, its speed
# limit and its dead zone, on a court whose simulation is held still.

const Court = preload("res://games/pong/court.tscn")

const UP := {"move": 0}
const STAY := {"move": 1}
const DOWN := {"move": 2}

var courts := []


func cleanup() -> void:
	for court in courts:
		court.queue_free()


# A court that does not simulate: the test sets the ball and the paddles itself.
func _court():
	var court = Court.instance()
	court.position = Vector2(20000 + 1000 * courts.size(), 0)
	tree.root.add_child(court)
	court.set_physics_process(false)
	courts.append(court)
	for paddle in court.paddles:
		paddle.begin_episode()
	return court


# n decision steps of frames_per_step physics frames each (the court's clock advanced by hand).
func _actions(paddle, n: int, frames_per_step := 1) -> Array:
	var actions := []
	for _i in range(n):
		actions.append(paddle.get_scripted_action())
		paddle.court.frames += frames_per_step
	return actions


static func _moves(actions: Array) -> Array:
	var moves := []
	for action in actions:
		moves.append(action["move"])
	return moves


func test_it_reacts_after_its_delay() -> void:
	var court = _court()
	var right = court.paddles[1]
	court.ball = Vector2(240, 20)  # far above both paddles (at 160)
	var actions := _actions(right, right.SCRIPTED_DELAY + 1)
	for i in range(right.SCRIPTED_DELAY):
		check_eq(actions[i], STAY, "step %d: it has not seen the ball yet" % i)
	check_eq(actions[-1], UP, "then it follows it up")
	court.ball = Vector2(240, 300)
	var moves := _moves(_actions(right, right.SCRIPTED_DELAY))
	check(moves.has(0) and not moves.has(2), "it still sees the ball above for its delay: %s" % [moves])
	moves = _moves(_actions(right, 3))
	check(moves.has(2) and not moves.has(0), "and then below: %s" % [moves])
	right.reset_episode()
	check_eq(_actions(right, right.SCRIPTED_DELAY), [STAY, STAY, STAY, STAY, STAY, STAY], "a new match: no memory")


# Its delay is in frames: deciding every 3 frames (pong's rate), 6 frames are 2 decision steps.
func test_its_delay_is_the_same_time_at_3_frames_per_step() -> void:
	var court = _court()
	var right = court.paddles[1]
	court.ball = Vector2(240, 20)
	check_eq(_actions(right, 3, 3), [STAY, STAY, UP], "it follows the ball up after 6 frames")
	court.ball = Vector2(240, 300)
	check_eq(_actions(right, 2, 3), [UP, UP], "it still sees the ball above for 6 frames")
	check_eq(_actions(right, 1, 3), [DOWN], "and then below")


func test_it_keeps_its_speed_limit_and_dead_zone() -> void:
	for frames_per_step in [1, 3]:
		var court = _court()
		var left = court.paddles[0]
		court.ball = Vector2(240, 310)
		var steps: int = left.SCRIPTED_DELAY / frames_per_step
		var actions := _actions(left, steps + 100, frames_per_step)
		var moves := 0
		for i in range(steps, actions.size()):
			moves += 1 if actions[i]["move"] == DOWN["move"] else 0
		# 240 px/s of a paddle's 300: 4 moves in 5, whatever a step lasts
		check(moves >= 78 and moves <= 82, "%d frames a step: 80 moves in 100 steps expected, got %d"
				% [frames_per_step, moves])
		court.ball = Vector2(240, court.paddle_y[0] + left.SCRIPTED_DEAD_ZONE - 1.0)
		check_eq(_actions(left, steps + 2, frames_per_step)[-1], STAY, "a ball in its dead zone: it stays")
