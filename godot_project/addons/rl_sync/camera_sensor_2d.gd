extends Node2D
# A camera for 2D observations: the game's world around this node, `view_size` world units across,
# as uint8 height x width x 3 (RGB) or x 1 (grayscale) values, row 0 the top of the picture.
#
# Put it on the agent (a child of the node that moves) and return its frame under an observation key
# containing "2d" (godot-rl's rule for images), beside the vector ones:
#     func get_obs():
#         return {"obs": [speed, ...], "camera_2d": $CameraSensor2D.get_frame()}
#     func get_obs_space() -> Dictionary:
#         return {"obs": {"size": [2], "space": "box"}, "camera_2d": $CameraSensor2D.obs_space()}
# Its Viewport shares the world of the viewport the sensor is in (the game's canvas; CanvasLayers such
# as an overlay are not in it) and looks at it through its own canvas transform, centred on this node.
# The frame is drawn on the decision frames that ask for it, all the scene's sensors at once
# (camera_frames.gd). A headless export draws nothing: image games run windowed.

const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")

export var width := 36
export var height := 36
export var grayscale := false
# The world units the picture spans, centred on this node.
export var view_size := Vector2(400, 400)
# Whether the picture turns with this node (up in the picture = this node's -y), or keeps the world's axes.
export var rotate_with_sensor := false

var _viewport: Viewport = null
var _frame := PoolByteArray()
var _declared := Vector2.ZERO


func _ready() -> void:
	add_to_group(CameraFrames.GROUP)
	var error := CameraFrames.size_problem(self)
	if error != "":
		CameraFrames.fail(get_tree(), error)
		return
	_declared = Vector2(width, height)
	_frame.resize(width * height * (1 if grayscale else 3))
	_viewport = CameraFrames.new_viewport(_declared, Viewport.USAGE_2D)
	_viewport.name = "View"
	_viewport.world_2d = get_viewport().world_2d
	add_child(_viewport)


# This agent's frame, drawn for this physics frame (PoolByteArray of width x height x channels bytes).
func get_frame() -> PoolByteArray:
	CameraFrames.draw(get_tree())
	return _frame


# The frame's space in env_info: {"size": [H, W, C], "space": "box"} (uint8 values, 0 to 255).
func obs_space() -> Dictionary:
	return {"size": [height, width, 1 if grayscale else 3], "space": "box"}


# Called by CameraFrames.draw(): "" or why this sensor cannot be drawn. The picture's canvas transform
# maps view_size world units around this node onto width x height pixels.
func prepare_draw() -> String:
	var error := CameraFrames.resized(self, _declared)
	if error != "":
		return error
	if not is_inside_tree() or _viewport == null or not is_instance_valid(_viewport) or _viewport.world_2d == null:
		return "camera sensor %s has no world to see (its View child was removed, or its world_2d cleared)" % get_path()
	var angle := global_rotation if rotate_with_sensor else 0.0
	var pixels := Vector2(width, height)
	var view := Transform2D().scaled(pixels / view_size) * Transform2D(-angle, Vector2.ZERO) \
			* Transform2D(0.0, -global_position)
	view.origin += pixels / 2.0
	_viewport.canvas_transform = view
	VisualServer.viewport_set_update_mode(_viewport.get_viewport_rid(), VisualServer.VIEWPORT_UPDATE_ONCE)
	return ""


# Called by CameraFrames.draw() after the draw: "" or why the frame could not be read.
func read_frame() -> String:
	var read := CameraFrames.read_back(self, _viewport)
	if read[1] == "":
		_frame = read[0]
	return read[1]
