extends Node2D
# One Memory maze: a T-shaped corridor drawn in windowed runs, and the generator of its cues.
# Nothing here simulates physics; the agent's controller (memory_agent.gd) is the whole game.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const ArenaGrid = preload("res://addons/rl_sync/arena_grid.gd")

const CELL := 16.0
const WIDTH := 200.0
const HEIGHT := 430.0
# Where the junction's cell sits; the corridor runs down from it, the arms run left and right.
const JUNCTION := Vector2(100, 40)
const ARM_CELLS := 4
const FLOOR := Color(0.16, 0.18, 0.22)
const WALL := Color(0.55, 0.58, 0.65)
const LEFT_COLOR := Color(0.35, 0.65, 1.0)
const RIGHT_COLOR := Color(1.0, 0.6, 0.25)

var index := 0
var seed_value := 0
var rng := RandomNumberGenerator.new()

onready var controller = $Agent
onready var _redraw := not RlArgs.is_headless()


func _ready() -> void:
	# Each maze has its own generator, so its cues depend only on the seed and its index.
	rng.seed = ArenaGrid.arena_seed(seed_value, index)


func _process(_delta: float) -> void:
	if _redraw:
		update()


func cell_position(cell: int) -> Vector2:
	return JUNCTION + Vector2(0, (controller.CORRIDOR_CELLS - cell) * CELL)


func _draw() -> void:
	var n: int = controller.CORRIDOR_CELLS
	var half := CELL / 2.0
	draw_rect(Rect2(Vector2.ZERO, Vector2(WIDTH, HEIGHT)), Color(0.11, 0.12, 0.15))
	# Arms, then the corridor, as floor cells with a wall outline.
	var arms := Rect2(JUNCTION - Vector2(ARM_CELLS * CELL + half, half), Vector2((2 * ARM_CELLS + 1) * CELL, CELL))
	var corridor := Rect2(JUNCTION - Vector2(half, half), Vector2(CELL, (n + 1) * CELL))
	for rect in [arms, corridor]:
		draw_rect(rect, FLOOR)
		draw_rect(rect.grow(2), WALL, false, 2.0)
	# The arm ends light up with the last choice: its colour says which side, green or red if right.
	if controller.last_choice != 0:
		var ok: bool = controller.last_choice == controller.last_cue
		var end := JUNCTION + Vector2(controller.last_choice * ARM_CELLS * CELL, 0)
		draw_circle(end, half, Color(0.4, 0.85, 0.45) if ok else Color(0.9, 0.3, 0.3))
	# The cue lamp below the corridor's foot: lit on the cue's side while the cue is shown.
	var lamp_y: float = cell_position(0).y + CELL
	draw_rect(Rect2(Vector2(JUNCTION.x - 40, lamp_y), Vector2(36, 14)),
			LEFT_COLOR if controller.cue_visible() and controller.cue < 0 else FLOOR)
	draw_rect(Rect2(Vector2(JUNCTION.x + 4, lamp_y), Vector2(36, 14)),
			RIGHT_COLOR if controller.cue_visible() and controller.cue > 0 else FLOOR)
	draw_circle(cell_position(controller.cell()), half - 2, Color(0.9, 0.9, 0.95))
