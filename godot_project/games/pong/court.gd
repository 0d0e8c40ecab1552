extends Node2D
# One Pong court: two paddles (their controllers are the two agents) and a ball.
#
# Court units are pixels at scale 1: the court is 480 x 320, paddles move vertically along the left
# (team 0) and right (team 1) edges. The ball is served from the centre towards a random side; it
# bounces off the top and bottom walls and off the paddles, a little faster after every hit, leaving
# at an angle that grows with how far from the paddle's centre it was hit. A ball past a paddle's edge
# is a point: +1 for the paddle that scored, -1 for the other, and the match (both agents' episode)
# ends; the time limit ends it as a draw. Everything is computed by hand each physics frame (no
# physics bodies), so a court's matches depend only on its seed and the paddles' actions.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const WIDTH := 480.0
const HEIGHT := 320.0
const PADDLE_X := 16.0  # the paddles' faces, this far from each goal line
const PADDLE_HALF := 30.0
const PADDLE_SPEED := 300.0  # px per second at full action
const BALL_RADIUS := 6.0
const SERVE_SPEED := 240.0
const MAX_BALL_SPEED := 480.0
const SPEED_UP := 1.05
const MAX_SERVE_ANGLE := 0.5  # radians either side of horizontal
const MAX_BOUNCE_ANGLE := 1.0  # for a hit at a paddle's very end

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()
var ball := Vector2.ZERO
var ball_velocity := Vector2.ZERO
# Each paddle's centre height, by team.
var paddle_y := [HEIGHT / 2.0, HEIGHT / 2.0]
var hits := 0
# Physics frames this court has run: the clock of the scripted opponent's reaction delay (a test that
# holds the court still advances it by hand).
var frames := 0

var _point_over := false
var _reset_frame := -1

onready var paddles := [$Left, $Right]  # by team (court.tscn sets each paddle's team)
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	# Each court has its own generator, so its matches depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


# A new match. Both paddles start an episode together (the sync node calls each one's reset when its
# episode ends, in the same frame): the court is reset once per frame.
func reset_match() -> void:
	var frame := Engine.get_physics_frames()
	if frame == _reset_frame:
		return
	_reset_frame = frame
	paddle_y = [HEIGHT / 2.0, HEIGHT / 2.0]
	ball = Vector2(WIDTH / 2.0, rng.randf_range(HEIGHT * 0.25, HEIGHT * 0.75))
	var angle := rng.randf_range(-MAX_SERVE_ANGLE, MAX_SERVE_ANGLE)
	var direction := -1.0 if rng.randf() < 0.5 else 1.0
	ball_velocity = Vector2(direction * cos(angle), sin(angle)) * SERVE_SPEED
	hits = 0
	_point_over = false


func _physics_process(delta: float) -> void:
	frames += 1
	if _redraw:
		update()
	if _point_over:
		return
	for team in range(2):
		paddle_y[team] = clamp(paddle_y[team] + paddles[team].move * PADDLE_SPEED * delta, PADDLE_HALF,
				HEIGHT - PADDLE_HALF)
	ball += ball_velocity * delta
	if ball.y < BALL_RADIUS or ball.y > HEIGHT - BALL_RADIUS:
		ball.y = clamp(ball.y, BALL_RADIUS, HEIGHT - BALL_RADIUS)
		ball_velocity.y = -ball_velocity.y
	if ball_velocity.x < 0.0 and ball.x - BALL_RADIUS <= PADDLE_X:
		_meet_paddle(0)
	elif ball_velocity.x > 0.0 and ball.x + BALL_RADIUS >= WIDTH - PADDLE_X:
		_meet_paddle(1)


# The ball reaches a paddle's line: returned when the paddle covers it, else the other team scores.
func _meet_paddle(team: int) -> void:
	var offset: float = (ball.y - paddle_y[team]) / (PADDLE_HALF + BALL_RADIUS)
	if abs(offset) > 1.0:
		_score(1 - team)
		return
	var speed: float = min(ball_velocity.length() * SPEED_UP, MAX_BALL_SPEED)
	var angle := offset * MAX_BOUNCE_ANGLE
	var away := 1.0 if team == 0 else -1.0
	ball_velocity = Vector2(away * cos(angle), sin(angle)) * speed
	ball.x = PADDLE_X + BALL_RADIUS if team == 0 else WIDTH - PADDLE_X - BALL_RADIUS
	hits += 1


func _score(winner: int) -> void:
	_point_over = true
	paddles[winner].reward += 1.0
	paddles[1 - winner].reward -= 1.0
	for paddle in paddles:
		paddle.done = true


func _draw() -> void:
	draw_rect(Rect2(Vector2.ZERO, Vector2(WIDTH, HEIGHT)), Color(0.16, 0.18, 0.22))
	draw_rect(Rect2(Vector2(-8, -8), Vector2(WIDTH + 16, HEIGHT + 16)), Color(0.55, 0.58, 0.65), false, 4.0)
	for y in range(0, int(HEIGHT), 20):
		draw_line(Vector2(WIDTH / 2.0, y), Vector2(WIDTH / 2.0, y + 10), Color(0.35, 0.38, 0.45), 2.0)
	var colors := [Color(0.35, 0.75, 1.0), Color(1.0, 0.6, 0.3)]
	for team in range(2):
		var x := PADDLE_X - 6.0 if team == 0 else WIDTH - PADDLE_X
		draw_rect(Rect2(Vector2(x, paddle_y[team] - PADDLE_HALF), Vector2(6, 2 * PADDLE_HALF)), colors[team])
	draw_circle(ball, BALL_RADIUS, Color(0.95, 0.95, 0.85))
