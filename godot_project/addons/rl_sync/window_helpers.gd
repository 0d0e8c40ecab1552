extends Reference
# What a run in a window adds to the RLSync node (sync.gd): the overlay (overlay.gd), --no_vsync,
# and --record_dir's frame capture (recorder.gd). A headless run has none of them.

const Contract = preload("res://addons/rl_sync/contract.gd")
const RlArgs = preload("res://addons/rl_sync/rl_args.gd")
const Overlay = preload("res://addons/rl_sync/overlay.gd")
const Recorder = preload("res://addons/rl_sync/recorder.gd")


# Adds them as children of `sync_node`; returns the overlay, which RLSync updates every decision step.
# First it says the agents the window shows, as the game built them (--agents may have asked for
# another number; `godot-ppo play` says this one). On stderr, which Godot 3.2 does not buffer.
static func add_to(sync_node: Node, record_every: int) -> Node:
	printerr(Contract.WINDOW_LINE + str(sync_node.agents.size()))
	var overlay = Overlay.new()
	sync_node.add_child(overlay)
	if RlArgs.has("no_vsync"):
		OS.vsync_enabled = false
	if RlArgs.get_string("record_dir", "") != "":
		var recorder = Recorder.new()
		recorder.directory = RlArgs.get_string("record_dir", "")
		recorder.every = record_every
		sync_node.add_child(recorder)
	return overlay
