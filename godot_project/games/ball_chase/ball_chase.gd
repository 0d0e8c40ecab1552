extends "res://addons/rl_sync/arena_grid.gd"
# BallChase: in each walled arena an agent chases fruit that respawns at random places.
#
# The addon's arena grid lays out --agents arenas (16 when training, 1 for human play) far enough
# apart that no ray or body of one reaches another, and fits them to the window through the canvas
# transform, so every simulating node stays at scale 1.


func _init() -> void:
	arena_scene = preload("res://games/ball_chase/arena.tscn")
	pitch = Vector2(480, 480)
	# An arena is 400 px square; its walls reach 20 px outside it.
	drawn_rect = Rect2(-20, -20, 440, 440)
