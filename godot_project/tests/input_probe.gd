extends Node
# A game written for people, for the input-action bridge's tests (addons/rl_sync/input_actions.gd): each
# physics frame and each idle frame it reads its actions as a game does (is_action_pressed,
# is_action_just_pressed, is_action_just_released, get_action_strength) and keeps one record per frame; a
# physics frame's record also counts the events of each action _input() got since the last one (a game that
# reads `event.is_action_pressed("jump")` there).
#
# In a scene (input_probe.tscn), run by tests/test_input_actions.py:
#   --probe_out=FILE                   a person's keyboard presses the actions; Escape ends the run and writes
#                                      {"physics": [...], "idle": [...]} to FILE
#   --probe_replay=KEYS --probe_out=F  the bridge presses, each physics frame, what KEYS' records held pressed in
#                                      that frame, for as many frames, then writes F
# The GDScript tests (test_input_actions.gd) add it to the tree with `bridge` and `actions` set instead.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const InputActions = preload("res://addons/rl_sync/input_actions.gd")
# The probe's own actions and the keys a person presses for them.
const KEYS := {"probe_left": KEY_J, "probe_jump": KEY_K, "probe_right": KEY_L}
const ANALOGUE_ACTIONS := ["probe_stick_left", "probe_stick_right"]
const READY_LINE := "input_probe: ready"

# The bridge that presses (null: a person's keyboard) and the agent's action of each physics frame (null
# in a frame: no decision, the last one holds).
var bridge = null
var actions := []
# One record per frame: action -> [pressed, just_pressed, just_released, strength] (and in `physics`, the
# _input() events [pressed, released] since the last physics frame).
var physics := []
var idle := []
var _events := {}
var _out := ""
var _stop := false


static func add_actions() -> void:
	for name in KEYS:
		if not InputMap.has_action(name):
			InputMap.add_action(name)
			var key := InputEventKey.new()
			key.scancode = KEYS[name]
			InputMap.action_add_event(name, key)
	for name in ANALOGUE_ACTIONS:
		if not InputMap.has_action(name):
			InputMap.add_action(name)


# The bridge's keys for the keyboard's actions: one discrete key per action, named as it.
static func key_per_action() -> Dictionary:
	var keys := {}
	for name in KEYS:
		keys[name] = [name]
	return keys


func _ready() -> void:
	add_actions()
	_out = RlArgs.get_string("probe_out")
	var replay := RlArgs.get_string("probe_replay")
	if replay != "":
		bridge = InputActions.new(key_per_action())
		actions = replayed(replay)
	elif _out != "":
		OS.set_window_title("rl_sync input probe")
		Engine.target_fps = 60


# The agent's actions that press, in each frame, what a keyboard run's physics records held pressed.
static func replayed(path: String) -> Array:
	var file := File.new()
	if file.open(path, File.READ) != OK:
		return []
	var records: Array = parse_json(file.get_as_text())["physics"]
	file.close()
	var out := []
	for record in records:
		var action := {}
		for name in KEYS:
			action[name] = int(record[name][0])
		out.append(action)
	return out


func _input(event: InputEvent) -> void:
	if event is InputEventKey and event.pressed and event.scancode == KEY_ESCAPE:
		_stop = true
	for name in KEYS.keys() + ANALOGUE_ACTIONS:
		var counts: Array = _events.get(name, [0, 0])
		counts[0] += int(event.is_action_pressed(name))
		counts[1] += int(event.is_action_released(name))
		_events[name] = counts


func _physics_process(_delta: float) -> void:
	var frame := physics.size()
	if _out != "" and (_stop or (bridge != null and frame >= actions.size())):
		_write()
		return
	if bridge != null and frame < actions.size() and actions[frame] != null:
		bridge.press(actions[frame])
	var frame_record := record()
	for name in frame_record:
		frame_record[name] += _events.get(name, [0, 0])
	_events = {}
	physics.append(frame_record)
	if frame == 0 and bridge == null:
		printerr(READY_LINE)  # stderr: unbuffered in a pipe


func _process(_delta: float) -> void:
	if not physics.empty() and idle.size() < physics.size():
		idle.append(record())


func record() -> Dictionary:
	var out := {}
	for name in KEYS.keys() + ANALOGUE_ACTIONS:
		out[name] = [int(Input.is_action_pressed(name)), int(Input.is_action_just_pressed(name)),
				int(Input.is_action_just_released(name)), stepify(Input.get_action_strength(name), 0.001)]
	return out


# How many frames of `records` saw a just_pressed (index 1) or a just_released (index 2) of `name`.
static func count(records: Array, name: String, index: int) -> int:
	var n := 0
	for record in records:
		n += int(record[name][index])
	return n


func _write() -> void:
	set_physics_process(false)
	var file := File.new()
	if file.open(_out, File.WRITE) == OK:
		file.store_string(to_json({"physics": physics, "idle": idle}))
		file.close()
	get_tree().quit(0)
