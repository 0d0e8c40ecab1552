extends Reference
# Our "stats" message, for profiling (godot-rl never sends it): the engine's own counters, and where
# a trainer session's decision steps spend their time, which TrainerSession counts with count_step().

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Contract = preload("res://addons/rl_sync/contract.gd")

# In microseconds summed over `steps`: building and sending the reply, waiting for the trainer's
# next message, reading and decoding it, checking and applying the actions, and everything between
# two decision steps (physics, the main loop).
var _timing := {"steps": 0, "reply_usec": 0, "wait_usec": 0, "read_usec": 0, "apply_usec": 0, "outside_usec": 0}
var _left_step_usec := 0


# Adds one decision step: it started at `start`, sent its reply at `sent`, the trainer's action
# began to arrive at `arrived` and was decoded at `decoded`; it ends now, applied.
func count_step(start: int, sent: int, arrived: int, decoded: int) -> void:
	var now := OS.get_ticks_usec()
	_timing["steps"] += 1
	if _left_step_usec > 0:
		_timing["outside_usec"] += start - _left_step_usec
	_timing["reply_usec"] += sent - start
	_timing["wait_usec"] += arrived - sent
	_timing["read_usec"] += decoded - arrived
	_timing["apply_usec"] += now - decoded
	_left_step_usec = now


func reply() -> Dictionary:
	return {
		Contract.TYPE_KEY: Contract.MSG_STATS,
		"time_usec": OS.get_ticks_usec(),
		"physics_frames": Engine.get_physics_frames(),
		"idle_frames": Engine.get_idle_frames(),
		"frames_drawn": Engine.get_frames_drawn(),
		"fps": Engine.get_frames_per_second(),
		"physics_ticks_per_second": Engine.iterations_per_second,
		"headless": RlArgs.is_headless(),
		"engine_version": Engine.get_version_info()["string"],
		"session": _timing.duplicate(),
	}
