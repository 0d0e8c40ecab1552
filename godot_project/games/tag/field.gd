extends Node2D
# One Tag field: a 300 x 300 square, a chaser and a runner (their controllers are the two agents).
#
# Each physics frame both move at their chosen velocity (the runner is a little faster, the chaser
# turns sharper: it moves in any direction, the runner in one of four), staying inside the walls.
# When they touch, the chaser scores +1, the runner -1, and the episode ends for both; at the time
# limit it ends for both as well. Moving closer pays the chaser, moving away pays the runner
# (potential-based shaping, which sums to the change of distance and cannot be farmed).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const SIZE := 300.0
const RADIUS := 10.0
const CHASER_SPEED := 150.0
const RUNNER_SPEED := 170.0
const CATCH_REWARD := 1.0
const SHAPING := 1.0

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()
var chaser_position := Vector2.ZERO
var runner_position := Vector2.ZERO

var _caught := false
var _distance := 0.0
var _reset_frame := -1

onready var chaser = $Chaser
onready var runner = $Runner
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


# A new round. Both agents start an episode together: the field is reset once per frame.
func reset_round() -> void:
	var frame := Engine.get_physics_frames()
	if frame == _reset_frame:
		return
	_reset_frame = frame
	chaser_position = _random_point()
	runner_position = _random_point()
	while runner_position.distance_to(chaser_position) < SIZE / 3.0:
		runner_position = _random_point()
	_distance = chaser_position.distance_to(runner_position)
	_caught = false


func _random_point() -> Vector2:
	return Vector2(rng.randf_range(RADIUS, SIZE - RADIUS), rng.randf_range(RADIUS, SIZE - RADIUS))


func _physics_process(delta: float) -> void:
	if _redraw:
		update()
	if _caught:
		return
	chaser_position = _inside(chaser_position + chaser.velocity * CHASER_SPEED * delta)
	runner_position = _inside(runner_position + runner.velocity * RUNNER_SPEED * delta)
	var distance := chaser_position.distance_to(runner_position)
	var closer := (_distance - distance) / SIZE * SHAPING
	chaser.reward += closer
	runner.reward -= closer
	_distance = distance
	if distance < 2.0 * RADIUS:
		_caught = true
		chaser.reward += CATCH_REWARD
		runner.reward -= CATCH_REWARD
		chaser.done = true
		runner.done = true


func _inside(p: Vector2) -> Vector2:
	return Vector2(clamp(p.x, RADIUS, SIZE - RADIUS), clamp(p.y, RADIUS, SIZE - RADIUS))


func _draw() -> void:
	draw_rect(Rect2(Vector2.ZERO, Vector2(SIZE, SIZE)), Color(0.16, 0.18, 0.22))
	draw_rect(Rect2(Vector2(-6, -6), Vector2(SIZE + 12, SIZE + 12)), Color(0.55, 0.58, 0.65), false, 3.0)
	draw_circle(chaser_position, RADIUS, Color(0.95, 0.35, 0.3))
	draw_circle(runner_position, RADIUS, Color(0.35, 0.75, 1.0))
