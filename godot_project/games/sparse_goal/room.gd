extends Node2D
# One SparseGoal room: walls and obstacles (StaticBody2D shapes in room.tscn), the start and the goal.
# Draws itself in windowed runs.
#
# The layout makes the goal hard to find by chance: the agent starts in the bottom-left corner, and the
# goal sits in the top-left corner on the other side of a wall that reaches from the left side most of
# the way across. The way round is about 1300 px, some 65 decision steps (right, up through the gap,
# back left), and a curiosity-driven agent finds it within about 100k steps; a random walk moves
# along a corridor by only about sqrt(0.4 * steps) steps' worth, some 13 of the 400 in an episode, so
# it practically never gets round. A policy that drifts one way (right and up) meets the far wall,
# not the goal: it has to turn back.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const SIZE := 600.0
const START := Vector2(50, 550)
# The start moves by up to this much each episode, so episodes differ a little.
const START_JITTER := 15.0
const GOAL := Vector2(50, 50)
const GOAL_RADIUS := 20.0

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()

onready var player: KinematicBody2D = $Player
onready var controller = $Player/AgentController
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	# Each room has its own generator, so its episodes depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


func start_position() -> Vector2:
	return START + Vector2(rng.randf_range(-START_JITTER, START_JITTER), rng.randf_range(-START_JITTER, START_JITTER))


func _process(_delta: float) -> void:
	if _redraw:
		update()


func _draw() -> void:
	draw_rect(Rect2(Vector2.ZERO, Vector2(SIZE, SIZE)), Color(0.16, 0.18, 0.22))
	# Every wall and obstacle, drawn from its collision shape so the picture is what the physics sees.
	for shape_node in $Walls.get_children():
		var extents: Vector2 = shape_node.shape.extents
		draw_rect(Rect2(shape_node.position - extents, extents * 2), Color(0.55, 0.58, 0.65))
	draw_circle(GOAL, GOAL_RADIUS, Color(0.4, 0.85, 0.45))
	draw_circle(START, 6, Color(0.5, 0.5, 0.55))
	var color := Color(0.35, 0.75, 1.0) if not controller.done else Color(0.6, 0.6, 0.6)
	draw_circle(player.position, controller.AGENT_RADIUS, color)
