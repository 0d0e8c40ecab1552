extends Spatial
# A camera for 3D observations: what a Camera at this node sees (looking down its -z), as uint8
# height x width x 3 (RGB) or x 1 (grayscale) values, row 0 the top of the picture.
#
# Put it on the agent's body (a child of the node that moves) and return its frame under an
# observation key containing "2d" (godot-rl's rule for images), beside the vector ones:
#     func get_obs():
#         return {"obs": [speed, ...], "camera_2d": $CameraSensor3D.get_frame()}
#     func get_obs_space() -> Dictionary:
#         return {"obs": {"size": [2], "space": "box"}, "camera_2d": $CameraSensor3D.obs_space()}
# The frame is drawn on the decision frames that ask for it, all the scene's sensors at once
# (camera_frames.gd), from the state the observation reports. A headless export draws nothing: image
# games run windowed.

const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")

export var width := 36
export var height := 36
export var grayscale := false
export var fov := 70.0
export var near := 0.05
export var far := 100.0
# Which layers the camera draws (a game can hide its own overlays from its agents).
export(int, LAYERS_3D_RENDER) var cull_mask := 0xFFFFF

var _viewport: Viewport = null
var _camera: Camera = null
var _frame := PoolByteArray()
# The size the sensor declared when it entered the tree, which it keeps.
var _declared := Vector2.ZERO


func _ready() -> void:
	add_to_group(CameraFrames.GROUP)
	var error := CameraFrames.size_problem(self)
	if error != "":
		CameraFrames.fail(get_tree(), error)
		return
	_declared = Vector2(width, height)
	_frame.resize(width * height * (1 if grayscale else 3))
	_viewport = CameraFrames.new_viewport(_declared, Viewport.USAGE_3D)
	_viewport.name = "View"
	_camera = Camera.new()
	_camera.fov = fov
	_camera.near = near
	_camera.far = far
	_camera.cull_mask = cull_mask
	_camera.current = true
	_viewport.add_child(_camera)
	add_child(_viewport)


# This agent's frame, drawn for this physics frame (PoolByteArray of width x height x channels bytes).
func get_frame() -> PoolByteArray:
	CameraFrames.draw(get_tree())
	return _frame


# The frame's space in env_info: {"size": [H, W, C], "space": "box"} (uint8 values, 0 to 255).
func obs_space() -> Dictionary:
	return {"size": [height, width, 1 if grayscale else 3], "space": "box"}


# Called by CameraFrames.draw(): "" or why this sensor cannot be drawn. The camera takes this node's
# transform now (the camera sits outside any Spatial parent, so it has a transform of its own).
func prepare_draw() -> String:
	var error := CameraFrames.resized(self, _declared)
	if error != "":
		return error
	if _camera == null or not is_instance_valid(_camera) or not _camera.is_inside_tree():
		return "camera sensor %s has no camera (its View or Camera child was removed)" % get_path()
	if get_world() == null or _viewport.find_world() == null:
		return "camera sensor %s has no world to see (is it inside a Viewport without one?)" % get_path()
	var eye := global_transform.orthonormalized()
	_camera.global_transform = eye
	# The transform reaches the VisualServer only when the frame's transforms are flushed: set it now.
	VisualServer.camera_set_transform(_camera.get_camera_rid(), eye)
	VisualServer.viewport_set_update_mode(_viewport.get_viewport_rid(), VisualServer.VIEWPORT_UPDATE_ONCE)
	return ""


# Called by CameraFrames.draw() after the draw: "" or why the frame could not be read.
func read_frame() -> String:
	var read := CameraFrames.read_back(self, _viewport)
	if read[1] == "":
		_frame = read[0]
	return read[1]
