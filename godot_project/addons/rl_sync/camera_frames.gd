extends Reference
# The frames of a scene's camera sensors (camera_sensor_2d.gd, camera_sensor_3d.gd): every sensor of a
# decision frame drawn in one VisualServer.force_draw(false), read back as uint8 H x W x C, once per
# physics frame.
#
# What Godot 3.2.3 does (measured under Xvfb and llvmpipe): an off-screen Viewport in the default
# UPDATE_WHEN_VISIBLE mode never renders; with the render loop, get_data() in _physics_process returns
# the previous frame (and the first frames are blank). A Viewport set to UPDATE_ONCE and drawn by
# force_draw() gives the current frame, with or without --disable-render-loop. So a sensor's Viewport
# stays UPDATE_DISABLED, and the first get_frame() of a physics frame (an agent's get_obs(), on a
# decision frame only) draws them all: the state it shows is the one the observations report. The
# state must have reached the VisualServer by then: a node moved in this same physics frame is drawn at
# its old place until the frame's transforms are flushed, so a reset is drawn a frame after it
# (step_order.gd, and the trainer's reset message: trainer_session.gd). A headless build (Godot's server
# platform) draws nothing: there every frame is blank, and the run refuses to use them (refusal()).

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

# Every sensor is in this group while it is in the tree.
const GROUP := "RL_CAMERA_SENSOR"
const MAX_SIDE := RlArgs.Contract.MAX_CAMERA_SIDE
# Engine metadata: the physics frame whose frames are drawn, and the first problem met (a String).
const DRAWN_META := "rl_sync_camera_drawn"
const PROBLEM_META := "rl_sync_camera_problem"
const HEADLESS := "this game's agents observe through camera sensors, and the headless export renders nothing: " \
		+ "run the windowed export (godot-ppo runs image games windowed, under Xvfb when there is no display)"


# Whether the scene holds a camera sensor (a vector game never has one: nothing here runs for it).
static func any(tree: SceneTree) -> bool:
	return tree.has_group(GROUP)


# "" or why this run cannot use its cameras at all (a headless build, with a sensor in the scene).
static func refusal(tree: SceneTree) -> String:
	return HEADLESS if RlArgs.is_headless() and any(tree) else ""


# "" or the first problem a sensor met (its one line was said then, and the run is ending).
static func problem() -> String:
	return Engine.get_meta(PROBLEM_META) if Engine.has_meta(PROBLEM_META) else ""


# "" or what is wrong with a sensor's size (a side of 0, or more than MAX_SIDE pixels).
static func size_problem(sensor) -> String:
	if sensor.width >= 1 and sensor.height >= 1 and sensor.width <= MAX_SIDE and sensor.height <= MAX_SIDE:
		return ""
	return "camera sensor %s: %d x %d pixels; give a width and a height from 1 to %d (36 x 36 is typical)" \
			% [sensor.get_path(), sensor.width, sensor.height, MAX_SIDE]


# Draws every sensor of the scene, once per physics frame: the first get_frame() of the frame calls it.
# A problem (a sensor resized, out of the world, a failed read-back) is said in one line and ends the
# run; the sensors' frames stay as they were (blank at first), so nothing waits for them.
static func draw(tree: SceneTree) -> void:
	var frame := Engine.get_physics_frames()
	if Engine.has_meta(DRAWN_META) and Engine.get_meta(DRAWN_META) == frame:
		return
	Engine.set_meta(DRAWN_META, frame)
	if RlArgs.is_headless() or problem() != "":
		return
	var sensors := tree.get_nodes_in_group(GROUP)
	for sensor in sensors:
		if not _ok(tree, sensor.prepare_draw()):
			return
	# The window's own viewport is not drawn here: with --disable-render-loop nobody would see it (the
	# buffers are not swapped), and with the render loop the main loop draws it anyway.
	var root := tree.root.get_viewport_rid()
	VisualServer.viewport_set_active(root, false)
	VisualServer.force_draw(false)
	VisualServer.viewport_set_active(root, true)
	for sensor in sensors:
		if not _ok(tree, sensor.read_frame()):
			return


static func _ok(tree: SceneTree, error: String) -> bool:
	if error == "":
		return true
	fail(tree, error)
	return false


# Says a sensor's problem in one line and ends the run (the trainer's session sends it too: problem()).
static func fail(tree: SceneTree, error: String) -> void:
	if problem() == "":
		Engine.set_meta(PROBLEM_META, error)
	RlArgs.fail(tree, error)


# The Image a sensor's Viewport holds, as H x W x C bytes (row 0 = the top of the picture): RGB, or
# grayscale (the mean of the three channels, Godot's conversion). [bytes, ""] or [null, the problem].
static func read_back(sensor, viewport: Viewport) -> Array:
	var image: Image = viewport.get_texture().get_data()
	if image == null or image.is_empty():
		return [null, "camera sensor %s: its Viewport gave no image (VisualServer.texture_get_data failed); cameras need the windowed export" \
				% sensor.get_path()]
	image.convert(Image.FORMAT_L8 if sensor.grayscale else Image.FORMAT_RGB8)
	var data := image.get_data()
	var expected: int = sensor.width * sensor.height * (1 if sensor.grayscale else 3)
	if data.size() != expected:
		return [null, "camera sensor %s: its Viewport gave %d bytes, expected %d x %d x %d" \
				% [sensor.get_path(), data.size(), sensor.height, sensor.width, 1 if sensor.grayscale else 3]]
	return [data, ""]


# The problem of a sensor whose size changed since it declared it, or "".
static func resized(sensor, declared: Vector2) -> String:
	if Vector2(sensor.width, sensor.height) == declared:
		return ""
	return "camera sensor %s: its size changed from %d x %d to %d x %d during the run; a camera keeps the size it declared" \
			% [sensor.get_path(), declared.x, declared.y, sensor.width, sensor.height]


# A sensor's Viewport: off-screen, RGBA8 (3D viewports default to HDR, 8 bytes a pixel), drawn only
# when draw() asks. Rows come out top first (render_target_v_flip: no Image.flip_y per frame).
static func new_viewport(size: Vector2, usage: int) -> Viewport:
	var viewport := Viewport.new()
	viewport.size = size
	viewport.usage = usage
	viewport.hdr = false
	viewport.render_target_v_flip = true
	viewport.render_target_update_mode = Viewport.UPDATE_DISABLED
	viewport.shadow_atlas_size = 0
	viewport.gui_disable_input = true
	return viewport
