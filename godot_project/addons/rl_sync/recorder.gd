extends Node
# Saves the window's frames as numbered PNGs (--record_dir=DIR), every `every` rendered frames.
#
# Run with the engine's --fixed-fps 60 so each frame is exactly one physics step: the frames then
# sample game time evenly however long a capture takes, and the clip plays at true speed.

const Contract = preload("res://addons/rl_sync/contract.gd")
var directory := ""
var every := 4
var _frame := 0
var _saved := 0


func _ready() -> void:
	var dir := Directory.new()
	if dir.make_dir_recursive(directory) != OK:
		printerr(Contract.ERROR_PREFIX + "--record_dir: cannot create %s" % directory)
		get_tree().quit(1)


func _process(_delta: float) -> void:
	_frame += 1
	if _frame % every != 0:
		return
	# The texture holds the previous frame once it has been drawn; flip it, as GL stores it upside down.
	var image := get_viewport().get_texture().get_data()
	image.flip_y()
	_saved += 1
	image.save_png(directory.plus_file("frame_%05d.png" % _saved))
