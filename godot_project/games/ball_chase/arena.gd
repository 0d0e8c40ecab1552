extends Node2D
# One arena: a walled square, the agent's body and the fruit. Draws itself in windowed runs.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const SIZE := 400.0
const FRUIT_RADIUS := 10.0
# Fruit never spawns this close to a wall or to the agent.
const SPAWN_MARGIN := 30.0

var index := 0
var seed_value := 0
var fruit_position := Vector2.ZERO
var rng := RandomNumberGenerator.new()

onready var player: KinematicBody2D = $Player
onready var controller = $Player/AgentController
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	# Each arena has its own generator, so an arena's episodes depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


func random_point(margin: float) -> Vector2:
	return Vector2(rng.randf_range(margin, SIZE - margin), rng.randf_range(margin, SIZE - margin))


func respawn_fruit() -> void:
	fruit_position = random_point(SPAWN_MARGIN)
	while fruit_position.distance_to(player.position) < 4 * SPAWN_MARGIN:
		fruit_position = random_point(SPAWN_MARGIN)


func _process(_delta: float) -> void:
	if _redraw:
		update()


func _draw() -> void:
	draw_rect(Rect2(Vector2.ZERO, Vector2(SIZE, SIZE)), Color(0.16, 0.18, 0.22))
	draw_rect(Rect2(Vector2(-20, -20), Vector2(SIZE + 40, SIZE + 40)), Color(0.55, 0.58, 0.65), false, 4.0)
	draw_circle(fruit_position, FRUIT_RADIUS, Color(0.95, 0.35, 0.3))
	var color := Color(0.35, 0.75, 1.0) if not controller.done else Color(0.6, 0.6, 0.6)
	draw_circle(player.position, controller.AGENT_RADIUS, color)
	# Return of the running episode, so a viewer sees how each agent is doing.
	var bar := clamp(controller.episode_return / 100.0, 0.0, 1.0)
	draw_rect(Rect2(Vector2(0, SIZE + 26), Vector2(SIZE * bar, 8)), Color(0.4, 0.85, 0.45))
