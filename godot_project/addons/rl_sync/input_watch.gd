extends Node
# The run-time half of the copies' check of the Input singleton: copies of a scene (scene_copies.gd) share one Input,
# so an agent that acts through it (Input.action_press, action_release, parse_input_event) presses every copy's keys.
# copies_check.gd reads the scripts for those calls before the copies are built; a call it cannot read (one built at
# run time, Input.call("action_" + "press", ...)) is seen here by its effect, while the copies run.
#
# scene_copies.gd adds this node beside the copies. At the end of every physics frame (after every game node: its
# process_priority) it asks Input about each action of the InputMap; and every input event reaches its _input.
#   - Headless, no device sends input: an action pressed or just released, or any input event, came from the game.
#   - In a window a person may press keys: an action counts only while none of its InputMap events is held on a key,
#     mouse button or joypad; of the events only an InputEventAction counts (no device sends one).
# The first one found is the run's problem (Engine metadata, as camera_frames.gd keeps a camera's): a trainer's session
# sends it instead of its next step reply, so the trainer stops with it in one line; a local mode (--benchmark_steps,
# --policy) fails at once. Its cost, one Input query per action and frame, is measured in docs/own_game.md.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")

const PROBLEM_META := "rl_sync_copies_input_problem"
# Past every game node's physics step in the frame (process_priority orders them, the lowest first).
const LAST := 1 << 30

# A trainer's session says the problem; any other mode (or none: a test) fails here when this is true.
var fails_at_once := not RlArgs.has("port")
var _copies := 2
var _actions := []
var _headless := true


# "" or what a copy pressed through the Input singleton (the run is ending with it).
static func problem() -> String:
	return Engine.get_meta(PROBLEM_META) if Engine.has_meta(PROBLEM_META) else ""


# The run's one line for `what` (an action or an input event) pressed through Input under `copies` copies.
static func message(copies: int, what: String) -> String:
	return ("--copies=%d: the game's code pressed %s through the Input singleton (Input.action_press, action_release " \
			+ "or parse_input_event), which every copy of the scene shares, so each copy's agents press the others' " \
			+ "keys: give each agent its actions through its controller's set_action, or run with --copies 1") \
			% [copies, what]


func _init(copies: int = 2) -> void:
	name = "InputWatch"
	_copies = copies
	process_priority = LAST
	pause_mode = PAUSE_MODE_PROCESS  # and while the tree is paused for a reset (step_order.gd)
	_headless = RlArgs.is_headless()
	for action in InputMap.get_actions():
		_actions.append(action)


func _physics_process(_delta: float) -> void:
	for action in _actions:
		if Input.is_action_pressed(action):
			if _headless or not _held_on_a_device(action):
				_found("the action \"%s\"" % action)
				return
		elif _headless and Input.is_action_just_released(action):
			_found("the action \"%s\" (released)" % action)
			return


func _input(event: InputEvent) -> void:
	if event is InputEventAction:
		_found("the action \"%s\" (an InputEventAction)" % event.action)
	elif _headless:
		_found("the input event \"%s\"" % event.as_text())


# Whether a key, mouse button or joypad holds one of the action's InputMap events down.
static func _held_on_a_device(action: String) -> bool:
	for event in InputMap.get_action_list(action):
		if event is InputEventKey and Input.is_key_pressed(event.scancode):
			return true
		if event is InputEventMouseButton and Input.is_mouse_button_pressed(event.button_index):
			return true
		if (event is InputEventJoypadButton or event is InputEventJoypadMotion) \
				and not Input.get_connected_joypads().empty():
			return true
	return false


# Keeps the first problem, and stops watching. A trainer's session says it (see the header); any other mode fails now.
func _found(what: String) -> void:
	set_physics_process(false)
	set_process_input(false)
	if problem() != "":
		return
	var line := message(_copies, what)
	Engine.set_meta(PROBLEM_META, line)
	if fails_at_once:
		RlArgs.fail(get_tree(), line)
