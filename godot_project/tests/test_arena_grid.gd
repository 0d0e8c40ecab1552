extends "res://tests/test_case.gd"
# arena_grid.gd (the root of memory and sparse_goal): arenas laid out apart at scale 1, the window fitted
# through the canvas transform only.

const Memory = preload("res://games/memory/memory.tscn")
const SparseGoal = preload("res://games/sparse_goal/sparse_goal.tscn")

var games := []


func cleanup() -> void:
	for game in games:
		game.queue_free()


# The game scene without its RLSync node: the test looks at the layout only.
func _game(scene: PackedScene, n_agents: int) -> Node2D:
	var game: Node2D = scene.instance()
	game.get_node("RLSync").free()
	game.n_agents = n_agents
	game.position = Vector2(-100000, -100000 * (games.size() + 1))
	tree.root.add_child(game)
	games.append(game)
	return game


func test_arenas_are_apart_and_unscaled() -> void:
	for scene in [Memory, SparseGoal]:
		var game := _game(scene, 5)
		check_eq(game.arenas.size(), 5, "one arena per agent")
		for i in range(game.arenas.size()):
			var arena: Node2D = game.arenas[i]
			check_eq(arena.index, i, "arena index")
			check(arena.global_transform.get_scale().is_equal_approx(Vector2.ONE), "arena %d is at scale 1" % i)
			for j in range(i):
				var gap: Vector2 = (arena.position - game.arenas[j].position).abs()
				check(gap.x >= game.pitch.x or gap.y >= game.pitch.y, "arenas %d and %d are a pitch apart" % [j, i])
		check(game.pitch.x > game.drawn_rect.size.x and game.pitch.y > game.drawn_rect.size.y,
				"the pitch leaves room between arenas")


func test_view_transform_fits_every_arena_in_the_window() -> void:
	var game := _game(Memory, 7)
	var view := Vector2(1024, 768)
	var fit: Transform2D = game.view_transform(view)
	var columns := 3
	var last: Vector2 = Vector2(columns - 1, 2) * game.pitch
	for corner in [game.drawn_rect.position, last + game.drawn_rect.end]:
		var on_screen: Vector2 = fit.xform(corner)
		check(on_screen.x >= 0 and on_screen.x <= view.x, "corner %s fits horizontally (%s)" % [corner, on_screen])
		check(on_screen.y >= game.VIEW_TOP - 0.01 and on_screen.y <= view.y, "corner %s fits vertically (%s)" % [corner, on_screen])
