extends Node2D
# Lays out --agents copies of an arena scene in a grid and fits the grid to the window.
#
# Use it as the root script of a game scene (or extend it): set `arena_scene`, `pitch` (the distance
# between arena origins, larger than an arena so no ray or body of one reaches another) and
# `drawn_rect` (what one arena draws, relative to its origin). Each arena gets `index` and
# `seed_value` before it enters the tree, so it can seed its own generator.
#
# Every simulating node stays at scale 1: speeds, rays and shapes are the same in world units whatever
# the number of arenas or the window size. A window fits the grid through the viewport's canvas
# transform, which only changes what is drawn.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

const TRAINING_AGENTS := 16
const HUMAN_AGENTS := 1
# More arenas than one process can start; a typo such as --agents=100000 fails at once instead.
const MAX_AGENTS := RlArgs.Contract.MAX_AGENTS_PER_INSTANCE
# The top strip of the window is left to the overlay's text.
const VIEW_TOP := 80.0
# Engine metadata set once a game has read --agents (agents_from_flag()).
const AGENTS_FROM_FLAG_META := "rl_sync_agents_from_flag"

export(PackedScene) var arena_scene: PackedScene
export var pitch := Vector2(500, 500)
export var drawn_rect := Rect2(0, 0, 400, 400)

# How many arenas to build; 0 reads --agents (the tests set it).
var n_agents := 0
var arenas := []

var _fits_view := false


# The seed of arena `index`'s own random generator: each arena's episodes depend only on --env_seed and
# its index, not on how many arenas there are or in which order they run.
static func arena_seed(seed_value: int, index: int) -> int:
	return seed_value * 1000003 + index * 7919 + 1


# How many arenas a game builds: `preset` when a test set it, else --agents (16 when a trainer or the
# benchmark drives the game, 1 for human play). null after a bad --agents (RlArgs has failed then).
# Static, so a game that lays out its arenas itself (a 3D one) reads the same flag the same way.
static func requested_agents(tree: SceneTree, preset: int):
	if preset > 0:
		return preset
	# The one reader of --agents notes that this game's count follows it (env_info says so).
	Engine.set_meta(AGENTS_FROM_FLAG_META, true)
	var default_agents := TRAINING_AGENTS if RlArgs.has("port") or RlArgs.has("benchmark_steps") else HUMAN_AGENTS
	return RlArgs.get_int(tree, "agents", default_agents, 1, MAX_AGENTS)


# Whether the running game built its agents from --agents (through requested_agents); false for a
# scene with a fixed set of agents, which --agents does not change.
static func agents_from_flag() -> bool:
	return Engine.has_meta(AGENTS_FROM_FLAG_META)


func _ready() -> void:
	var agents_arg = requested_agents(get_tree(), n_agents)
	var seed_value = RlArgs.get_int(get_tree(), "env_seed", 0, 0)
	if RlArgs.has_failed():
		return
	n_agents = agents_arg
	var columns := _columns()
	for i in range(n_agents):
		var arena = arena_scene.instance()
		arena.index = i
		arena.seed_value = seed_value
		arena.position = Vector2(i % columns, i / columns) * pitch
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


func _columns() -> int:
	return int(ceil(sqrt(max(n_agents, 1))))


func _fit_to_window() -> void:
	get_viewport().canvas_transform = view_transform(get_viewport_rect().size)


# The canvas transform that shows every arena's drawn_rect in a view of this size, below the overlay.
func view_transform(view_size: Vector2) -> Transform2D:
	var columns := _columns()
	var rows := int(ceil(max(n_agents, 1) / float(columns)))
	var grid := Rect2(drawn_rect.position, Vector2(columns - 1, rows - 1) * pitch + drawn_rect.size)
	var area := view_size - Vector2(20, VIEW_TOP + 10)
	var zoom: float = max(min(area.x / grid.size.x, area.y / grid.size.y), 0.01)
	var offset := Vector2((view_size.x - grid.size.x * zoom) / 2.0, VIEW_TOP) - grid.position * zoom
	return Transform2D(Vector2(zoom, 0), Vector2(0, zoom), offset)
