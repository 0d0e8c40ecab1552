extends "res://addons/rl_sync/arena_grid.gd"
# CartPole: gymnasium's CartPole-v1, exactly (see cart_pole_physics.gd), one cart per agent.
#
# The addon's arena grid lays out --agents carts (16 when training, 1 for human play) and fits them to
# the window through the canvas transform. The carts share nothing: each has its own state and random
# generator.

const CartScript = preload("res://games/cart_pole/cart.gd")


func _init() -> void:
	arena_scene = preload("res://games/cart_pole/cart.tscn")
	pitch = Vector2(CartScript.TRACK_WIDTH + 40, CartScript.HEIGHT + 30)
	# A cart's track runs from its origin to TRACK_WIDTH; the cart body reaches a little past either end.
	drawn_rect = Rect2(-20, 0, CartScript.TRACK_WIDTH + 40, CartScript.HEIGHT)


# Tracks are wide and short: fewer columns than rows keeps the cells near a 4:3 window's shape.
func _columns() -> int:
	return int(ceil(sqrt(max(n_agents, 1) / 3.0)))
