extends "res://tests/test_case.gd"
# BallChase's world is the same in world units whatever the number of arenas and the window size:
# only the viewport's canvas transform fits the view.

const BallChase = preload("res://games/ball_chase/ball_chase.tscn")
const MAX_SPEED := 300.0

var game: Node2D
var _root_size := Vector2.ZERO


func cleanup() -> void:
	if game != null:
		game.queue_free()
	# Through a variable: `tree.root.size = x` would also try to assign the read-only `root`.
	var root: Viewport = tree.root
	if _root_size != Vector2.ZERO:
		root.size = _root_size
	root.canvas_transform = Transform2D.IDENTITY


# The game scene without its RLSync node: the test drives the arenas itself.
func _game(n_agents: int) -> Node2D:
	game = BallChase.instance()
	game.get_node("RLSync").free()
	game.n_agents = n_agents
	tree.root.add_child(game)
	return game


func _replace_game(n_agents: int):
	game.queue_free()
	yield(tree, "idle_frame")
	return _game(n_agents)


# What the physics sees: arena transforms, a ray's reach and a body's speed, all in world units.
func _world(g: Node2D) -> Dictionary:
	var transforms := []
	for arena in g.arenas:
		transforms.append(arena.global_transform)
	var ray: RayCast2D = g.arenas[0].get_node("Player/RaycastSensor").get_child(0)
	return {
		"transforms": transforms,
		"ray_reach": ray.global_transform.basis_xform(ray.cast_to).length(),
		"radius_scale": g.arenas[0].get_node("Player/Shape").global_transform.get_scale(),
	}


func _speed(g: Node2D):
	var arena = g.arenas[0]
	# Start on a frame boundary: each later boundary is one physics step further.
	yield(physics_frames(1), "completed")
	# In the arena's frame, where the game measures distances to walls and fruit.
	var start: Vector2 = arena.player.position
	arena.controller.set_action({"move": [1.0, 0.0]})
	yield(physics_frames(6), "completed")
	arena.controller.set_action({"move": [0.0, 0.0]})
	return (arena.player.position - start).length() * 10.0


func _check_unit_scale(world: Dictionary, n_agents: int) -> void:
	var columns := int(ceil(sqrt(n_agents)))
	var wrong := []
	for i in range(n_agents):
		var t: Transform2D = world["transforms"][i]
		var expected := Vector2(i % columns, i / columns) * 480.0
		if t.x != Vector2(1, 0) or t.y != Vector2(0, 1) or t.origin != expected:
			wrong.append("arena %d: %s" % [i, str(t)])
	check(wrong.empty(), "%d arenas: each arena at scale 1 on the 480-unit grid; %s" % [n_agents, str(wrong)])
	check_near(world["ray_reach"], 300.0, 1e-3, "%d arenas: a ray's reach in world units" % n_agents)
	check_eq(world["radius_scale"], Vector2.ONE, "%d arenas: the agent's shape is unscaled" % n_agents)


func test_one_and_sixteen_arenas_share_the_world_scale() -> void:
	var one := _world(_game(1))
	var one_speed = yield(_speed(game), "completed")
	yield(_replace_game(16), "completed")
	var sixteen := _world(game)
	var sixteen_speed = yield(_speed(game), "completed")
	_check_unit_scale(one, 1)
	_check_unit_scale(sixteen, 16)
	check_eq(sixteen["transforms"][0], one["transforms"][0], "arena 0's global transform for 1 and 16 arenas")
	# 6 frames at 1/60 s, scaled to a second: the top speed in arena units per second.
	check_near(one_speed, MAX_SPEED, 1.0, "1 arena: arena units per second at full speed")
	check_near(sixteen_speed, MAX_SPEED, 1.0, "16 arenas: arena units per second at full speed")


func test_fitting_the_view_moves_only_the_canvas() -> void:
	var root: Viewport = tree.root
	_root_size = root.size
	_game(16)
	var before := _world(game)
	for size in [Vector2(1024, 768), Vector2(640, 360), Vector2(1920, 1080)]:
		root.size = size
		# Headless runs skip fitting, so do what a window's size_changed would.
		game._fit_to_window()
		var view: Transform2D = root.canvas_transform
		check(view != Transform2D.IDENTITY, "%s: the canvas transform fits the view" % str(size))
		check_eq(_world(game), before, "%s: world transforms after the resize" % str(size))
		# The grid fits the view: the last arena's far corner is inside it.
		var corner: Vector2 = view.xform(game.arenas[-1].global_position + Vector2(400, 400))
		check(corner.x <= size.x and corner.y <= size.y,
				"%s: the grid's far corner %s is in view" % [str(size), str(corner)])
	check_eq(game.scale, Vector2.ONE, "the game's root is never scaled")
