extends Node2D
# One cart's track: owns the random generator of its episodes and draws the cart and pole of its
# agent (the child AgentController) in windowed runs. The simulation is the controller's state, in
# metres; only the drawing converts it to pixels, so nothing that simulates is ever scaled.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")
const Physics = preload("res://games/cart_pole/cart_pole_physics.gd")

# Pixels per metre of the drawing: gymnasium's renderer shows the track's 4.8 m in 600 px.
const PIXELS_PER_METRE := 125.0
const TRACK_WIDTH := 2 * Physics.X_THRESHOLD * PIXELS_PER_METRE
const CART_SIZE := Vector2(50, 30)
const POLE_WIDTH := 10.0
const POLE_PIXELS := 2 * Physics.LENGTH * PIXELS_PER_METRE
# Height of a cell in the grid, above the track's line: room for the pole standing upright.
const HEIGHT := 200.0

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()

onready var controller = $AgentController
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	# Each cart has its own generator, so a cart's episodes depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


func _process(_delta: float) -> void:
	if _redraw:
		update()


# The track runs from (0, HEIGHT) to (TRACK_WIDTH, HEIGHT); x = 0 is its middle.
func _draw() -> void:
	var ground := HEIGHT - 20.0
	draw_rect(Rect2(Vector2(0, 0), Vector2(TRACK_WIDTH, HEIGHT)), Color(0.16, 0.18, 0.22))
	draw_line(Vector2(0, ground), Vector2(TRACK_WIDTH, ground), Color(0.55, 0.58, 0.65), 2.0)
	var state: Array = controller.state
	var centre := Vector2(TRACK_WIDTH / 2 + state[0] * PIXELS_PER_METRE, ground - CART_SIZE.y / 2)
	var color := Color(0.35, 0.75, 1.0) if not controller.done else Color(0.6, 0.6, 0.6)
	draw_rect(Rect2(centre - CART_SIZE / 2, CART_SIZE), color)
	# theta is measured from upright, positive clockwise as gymnasium draws it.
	var tip := centre + Vector2(sin(state[2]), -cos(state[2])) * POLE_PIXELS
	draw_line(centre, tip, Color(0.8, 0.6, 0.4), POLE_WIDTH)
	draw_circle(centre, POLE_WIDTH / 2, Color(0.5, 0.5, 0.8))
	# The running episode's length out of the time limit, so a viewer sees how each cart is doing.
	var bar := clamp(controller.n_steps / float(controller.max_episode_steps), 0.0, 1.0)
	draw_rect(Rect2(Vector2(0, HEIGHT - 8), Vector2(TRACK_WIDTH * bar, 6)), Color(0.4, 0.85, 0.45))
