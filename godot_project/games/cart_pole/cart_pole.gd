extends Node2D
# CartPole: gymnasium's CartPole-v1, exactly (see cart_pole_physics.gd), one cart per agent.
#
# One instance simulates --agents independent carts (default 16 when training, 1 for human play),
# drawn in a grid. The carts share nothing: each has its own state and random generator. A window
# fits the grid to its size through the viewport's canvas transform, which only changes what is
# drawn.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Cart = preload("res://games/cart_pole/cart.tscn")
const CartScript = preload("res://games/cart_pole/cart.gd")

const TRAINING_AGENTS := 16
# Like ball_chase's bound: more carts than one process sets up in good time belong in more instances.
const MAX_AGENTS := 2048
const HUMAN_AGENTS := 1
const CELL := Vector2(CartScript.TRACK_WIDTH + 40, CartScript.HEIGHT + 30)
# The top strip of the window is left to the overlay's text.
const VIEW_TOP := 80.0

# How many carts to build; 0 reads --agents (the tests set it).
var n_agents := 0
var carts := []

var _fits_view := false


func _ready() -> void:
	var default_agents := TRAINING_AGENTS if RlArgs.has("port") or RlArgs.has("benchmark_steps") else HUMAN_AGENTS
	# null after a bad --agents (RlArgs has failed then).
	var agents_arg = RlArgs.get_int(get_tree(), "agents", default_agents, 1, MAX_AGENTS) if n_agents <= 0 else n_agents
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	n_agents = agents_arg
	var columns := _columns()
	for i in range(n_agents):
		var cart = Cart.instance()
		cart.index = i
		cart.seed_value = seed_value
		cart.position = Vector2(i % columns, i / columns) * CELL
		add_child(cart)
		carts.append(cart)
	_fits_view = not RlArgs.is_headless()
	if _fits_view:
		get_viewport().connect("size_changed", self, "_fit_to_window")
		_fit_to_window()


func _exit_tree() -> void:
	# The canvas transform belongs to the viewport, which outlives this scene.
	if _fits_view:
		get_viewport().canvas_transform = Transform2D.IDENTITY


# Tracks are wide and short: fewer columns than rows keeps the cells near a 4:3 window's shape.
func _columns() -> int:
	return int(ceil(sqrt(max(n_agents, 1) / 3.0)))


func _fit_to_window() -> void:
	get_viewport().canvas_transform = view_transform(get_viewport_rect().size)


# The canvas transform that shows every cart in a view of this size, centred below the overlay.
func view_transform(view_size: Vector2) -> Transform2D:
	var columns := _columns()
	var rows := int(ceil(max(n_agents, 1) / float(columns)))
	var area := view_size - Vector2(20, VIEW_TOP + 10)
	var grid := Vector2(columns, rows) * CELL
	var zoom: float = max(min(area.x / grid.x, area.y / grid.y), 0.01)
	var offset := Vector2((view_size.x - grid.x * zoom) / 2.0 + 20 * zoom, VIEW_TOP)
	return Transform2D(Vector2(zoom, 0), Vector2(0, zoom), offset)
