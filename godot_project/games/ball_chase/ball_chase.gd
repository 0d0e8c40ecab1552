extends Node2D
# BallChase: in each walled arena an agent chases fruit that respawns at random places.
#
# One instance simulates --agents independent arenas (default 16 when training, 1 for human play),
# laid out in a grid. Arenas sit far enough apart that no ray or body of one can reach another.
# Every simulating node stays at scale 1, so speeds, rays and shapes are the same in world units
# whatever the number of arenas or the window size: a window fits the grid to its size through the
# viewport's canvas transform, which only changes what is drawn.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Arena = preload("res://games/ball_chase/arena.tscn")

const ARENA_PITCH := 480.0
const TRAINING_AGENTS := 16
# More arenas than one process can start (4096 overflow the engine's message queue and never connect);
# a typo such as --agents=100000 would otherwise spend minutes past any trainer's connect timeout.
const MAX_AGENTS := 2048
const HUMAN_AGENTS := 1
# The top strip of the window is left to the overlay's text.
const VIEW_TOP := 80.0
# Where the first arena's origin sits in the grid's box: its walls reach 20 px outside the origin and
# each 480 px cell draws 440 px, so a 40 px shift centres the drawn grid horizontally.
const GRID_ORIGIN := Vector2(40, 20)

# How many arenas to build; 0 reads --agents (the tests set it).
var n_agents := 0
var arenas := []

var _fits_view := false


func _ready() -> void:
	var default_agents := TRAINING_AGENTS if RlArgs.has("port") or RlArgs.has("benchmark_steps") else HUMAN_AGENTS
	# null after a bad --agents (RlArgs has failed then).
	var agents_arg = RlArgs.get_int(get_tree(), "agents", default_agents, 1, MAX_AGENTS) if n_agents <= 0 else n_agents
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	n_agents = agents_arg
	var columns := int(ceil(sqrt(n_agents)))
	for i in range(n_agents):
		var arena = Arena.instance()
		arena.index = i
		arena.seed_value = seed_value
		arena.position = Vector2(i % columns, i / columns) * ARENA_PITCH
		add_child(arena)
		arenas.append(arena)
	# Headless nothing is drawn, so there is no view to fit.
	_fits_view = not RlArgs.is_headless()
	if _fits_view:
		get_viewport().connect("size_changed", self, "_fit_to_window")
		_fit_to_window()


func _exit_tree() -> void:
	# The canvas transform belongs to the viewport, which outlives this scene.
	if _fits_view:
		get_viewport().canvas_transform = Transform2D.IDENTITY


func _fit_to_window() -> void:
	get_viewport().canvas_transform = view_transform(get_viewport_rect().size)


# The canvas transform that shows the whole grid in a view of this size, centred below the overlay.
func view_transform(view_size: Vector2) -> Transform2D:
	var columns := int(ceil(sqrt(max(arenas.size(), 1))))
	var rows := int(ceil(max(arenas.size(), 1) / float(columns)))
	var area := view_size - Vector2(20, VIEW_TOP + 10)
	var grid := Vector2(columns, rows) * ARENA_PITCH
	var zoom: float = max(min(area.x / grid.x, area.y / grid.y), 0.01)
	var offset := Vector2((view_size.x - grid.x * zoom) / 2.0, VIEW_TOP) + GRID_ORIGIN * zoom
	return Transform2D(Vector2(zoom, 0), Vector2(0, zoom), offset)
