extends Reference
# How long a local run (policy, human) lasts: --quit_after_frames (recordings, benchmarks; each frame
# is one physics step with --fixed-fps) or --quit_after_seconds (wall clock, for watching), and the
# rates it held, which RLSync (sync.gd) prints as {"run": {...}} when it ends the run.

const Contract = preload("res://addons/rl_sync/contract.gd")
var _quit_after_frames := 0
var _quit_after_usec := 0
var _start_usec := 0
var _start_drawn := 0
var _start_frames := 0


# The clock starts now.
func _init(quit_after_frames: int, quit_after_seconds: float) -> void:
	_quit_after_frames = quit_after_frames
	_quit_after_usec = int(quit_after_seconds * 1e6)
	_start_usec = OS.get_ticks_usec()
	_start_drawn = Engine.get_frames_drawn()
	_start_frames = Engine.get_idle_frames()


# Whether the run has a limit at all: RLSync only watches the clock then.
func is_limited() -> bool:
	return _quit_after_frames > 0 or _quit_after_usec > 0


func is_over() -> bool:
	if _quit_after_frames > 0 and Engine.get_idle_frames() - _start_frames < _quit_after_frames:
		return false
	if _quit_after_usec > 0 and OS.get_ticks_usec() - _start_usec < _quit_after_usec:
		return false
	return true


# `physics_frames`: the physics frames the run simulated (RLSync counts them).
func report(mode_text: String, n_agents: int, physics_frames: int) -> Dictionary:
	var seconds := (OS.get_ticks_usec() - _start_usec) / 1e6
	var drawn := Engine.get_frames_drawn() - _start_drawn
	return {Contract.RUN_REPORT: {
		"mode": mode_text,
		"agents": n_agents,
		"seconds": seconds,
		"frames_drawn": drawn,
		"physics_frames": physics_frames,
		"fps": drawn / max(seconds, 1e-9),
		"physics_fps": physics_frames / max(seconds, 1e-9),
	}}
