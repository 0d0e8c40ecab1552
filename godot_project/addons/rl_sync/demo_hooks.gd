extends Reference
# What --record_demos adds to a run of the RLSync node (sync.gd): the recorder (demo_recorder.gd)
# started when a local driver plays, and the run's end once it holds the episodes asked for.
# RLSync itself hands the recorder every action (act()) and decision step (decision_step()).
# Nothing here quits: each call returns a Result (result.gd), for RLSync to report.

const RunMode = preload("res://addons/rl_sync/run_mode.gd")
const DemoRecorder = preload("res://addons/rl_sync/demo_recorder.gd")
const CameraFrames = preload("res://addons/rl_sync/camera_frames.gd")
const Result = preload("res://addons/rl_sync/result.gd")


# GO_ON with a started DemoRecorder, or FAILED. Only a local driver (the keyboard, --policy) makes
# demonstrations: a trainer's actions are still being learnt, a benchmark's random.
static func start(mode: int, env_name: String, agents: Array, action_spaces: Array) -> Reference:
	if mode == RunMode.Mode.TRAIN or mode == RunMode.Mode.BENCHMARK:
		return Result.failed("--record_demos records the keyboard or a --policy: drop --port / --benchmark_steps")
	if CameraFrames.any(agents[0].get_tree()):
		return Result.failed("--record_demos records vector observations, and this game's agents observe through camera sensors: record a game without cameras")
	var demos := DemoRecorder.new()
	var error := demos.start(env_name, agents, action_spaces)
	if error != "":
		return Result.failed(error)
	print("rl_sync: " + demos.summary() + " in " + demos.path)
	return Result.go_on(demos)


# After every decision step: Backspace drops the last episode, and the run is over once the recorder
# has --record_episodes of them: GO_ON, DONE, or FAILED.
static func after_step(demos: DemoRecorder) -> Reference:
	var error := demos.poll_drop_key()
	if error != "":
		return Result.failed(error)
	if demos.is_done():
		print("rl_sync: recorded %d episodes in %s" % [demos.recorded_here, demos.path])
		return Result.done()
	return Result.go_on()
