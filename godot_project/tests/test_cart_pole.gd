extends "res://tests/test_case.gd"
# cart_pole's physics against numbers from gymnasium's CartPole-v1 (the Python suite checks whole
# episodes in a real instance), its set_state checks, and its view: the carts' world never scales.

const CartPole = preload("res://games/cart_pole/cart_pole.tscn")
const Physics = preload("res://games/cart_pole/cart_pole_physics.gd")

var game: Node2D


func cleanup() -> void:
	if game != null:
		game.queue_free()
	# Through a variable: `tree.root.x = y` would also try to assign the read-only `root`.
	var root: Viewport = tree.root
	root.canvas_transform = Transform2D.IDENTITY


func _game(n_agents: int) -> Node2D:
	game = CartPole.instance()
	game.get_node("RLSync").free()
	game.n_agents = n_agents
	tree.root.add_child(game)
	return game


# gymnasium: env.unwrapped.state = [0.01, -0.02, 0.03, 0.04]; env.step(a); env.unwrapped.state.tolist().
# GDScript reads long float literals only to about 1e-16, so this compares to 1e-15; the Python suite
# (tests/test_cart_pole.py) compares the bits of whole episodes.
func test_one_step_is_gymnasiums() -> void:
	var start := [0.01, -0.02, 0.03, 0.04]
	var expected := {
		1: [0.009600000000000001, 0.17467919574755525, 0.030799999999999998, -0.2430687179600081],
		0: [0.009600000000000001, -0.21553901710278936, 0.030799999999999998, 0.34199522377603914],
	}
	for action in expected:
		var state := Physics.step(start, action)
		for i in range(4):
			check_near(state[i], expected[action][i], 1e-15, "action %d, value %d" % [action, i])
	check_near(Physics.THETA_THRESHOLD, 0.20943951023931953, 1e-16, "12 degrees in radians")


func test_termination_thresholds() -> void:
	check(not Physics.is_terminal([2.4, 0.0, 0.2094395102393195, 0.0]), "on the thresholds is not out")
	check(Physics.is_terminal([2.4000001, 0.0, 0.0, 0.0]), "past x = 2.4")
	check(Physics.is_terminal([-2.4000001, 0.0, 0.0, 0.0]), "past x = -2.4")
	check(Physics.is_terminal([0.0, 0.0, -0.21, 0.0]), "past -12 degrees")


func test_episodes_start_within_five_hundredths_and_the_state_can_be_set() -> void:
	var g := _game(3)
	for cart in g.arenas:
		cart.controller.begin_episode()
		for value in cart.controller.state:
			check(abs(value) <= Physics.RESET_BOUND, "a start within +-0.05: %s" % str(cart.controller.state))
	var agent = g.arenas[0].controller
	check_eq(agent.set_state([0.5, 0, -0.1, 1.5]), "", "4 numbers")
	check_eq(agent.state, [0.5, 0.0, -0.1, 1.5], "the state set")
	var exact: String = agent.get_state_f64()
	agent.begin_episode()
	check_eq(agent.set_state(exact), "", "the base64 of get_state_f64")
	check_eq(agent.state, [0.5, 0.0, -0.1, 1.5], "the state set from base64")
	check(agent.set_state([1, 2]).begins_with("set_state: expected 4 numbers"), "too few numbers")
	check(agent.set_state("AAAA").begins_with("set_state: expected the base64 of 4 float64"), "too few bytes")
	check_eq(agent.state, [0.5, 0.0, -0.1, 1.5], "a refused state changes nothing")


func test_the_view_fits_every_cart_and_scales_nothing_that_simulates() -> void:
	var g := _game(16)
	for n in [1, 16]:
		if n != g.n_agents:
			g.queue_free()
			yield(tree, "idle_frame")
			g = _game(n)
		var view := Vector2(1024, 768)
		var transform: Transform2D = g.view_transform(view)
		for cart in g.arenas:
			check_eq(cart.global_transform.get_scale(), Vector2.ONE, "cart %d's node is at scale 1" % cart.index)
			var corner: Vector2 = transform.xform(cart.position + Vector2(cart.TRACK_WIDTH, cart.HEIGHT))
			check(corner.x <= view.x + 0.5 and corner.y <= view.y + 0.5, "%d carts: cart %d is in view" % [n, cart.index])
			check(transform.xform(cart.position).y >= g.VIEW_TOP - 0.5, "below the overlay")
