extends Reference
# What --record_demos adds to a run of the RLSync node (sync.gd): the recorder (demo_recorder.gd)
# started when a local driver plays, and the run's end once it holds the episodes asked for.
# RLSync itself hands the recorder every action (act()) and decision step (decision_step()).
# Nothing here quits: errors come back as a String, for RLSync to report.

const RunMode = preload("res://addons/rl_sync/run_mode.gd")
const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")


# A started DemoRecorder, or a String saying what is wrong. Only a local driver (the keyboard,
# --policy) makes demonstrations: a trainer's actions are still being learnt, a benchmark's random.
static func start(mode: int, env_name: String, agents: Array, action_spaces: Array):
	if mode == RunMode.Mode.TRAIN or mode == RunMode.Mode.BENCHMARK:
		return "--record_demos records the keyboard or a --policy: drop --port / --benchmark_steps"
	if CameraFrames.any(agents[0].get_tree()):
		return "--record_demos records vector observations, and this game's agents observe through camera sensors: record a game without cameras"
	var demos := DemoRecorder.new()
	var error := demos.start(env_name, agents, action_spaces)
	if error != "":
		return error
	print("rl_sync: " + demos.summary() + " in " + demos.path)
	return demos


# After every decision step: Backspace drops the last episode, and the run is over once the recorder
# has --record_episodes of them. "" to go on, RunMode.DONE, or what is wrong.
static func after_step(demos: DemoRecorder) -> String:
	var error := demos.poll_drop_key()
	if error != "":
		return error
	if demos.is_done():
		print("rl_sync: recorded %d episodes in %s" % [demos.recorded_here, demos.path])
		return RunMode.DONE
	return ""
