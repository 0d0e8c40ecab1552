extends Reference
# Actor mode (issue 58, `godot-ppo train --in-engine`): the game samples its agents' actions from the
# trainer's policy itself and sends whole fragments of steps, the trainer taking no part in the steps.
# The exchange, its words and the fragment's layout: fragment_wire.gd.
#
# The trainer's session (trainer_session.gd) shows this every message it reads (route(): in actor mode a
# binary message is always weights, wrapped as {"type": "fragment", "weights": bytes}; another kind of
# message leaves actor mode), then hands it its "actors" and "fragment" messages (answer()). RunMode
# (run_mode.gd) calls step() at each decision step while a fragment is being collected. The mode lives on the sync node (META); fragment_actors.gd holds the policy and
# the samplers, fragment_recorder.gd the collection. godot-rl's clients never send "actors", so nothing
# here ever runs for them.

const FragmentWire = preload("res://addons/rl_sync/fragment_wire.gd")
const FragmentActors = preload("res://addons/rl_sync/fragment_actors.gd")
const FragmentRecorder = preload("res://addons/rl_sync/fragment_recorder.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# The sync node's meta key: the FragmentRecorder of actor mode (absent until "actors" succeeds).
const META := "rl_sync_actors"
# The field a binary message in actor mode arrives in (the session wraps it; JSON cannot hold bytes).
const WEIGHTS_FIELD := "weights"


# Answers a message of actor mode. Returns GO_ON to read the next message, WAIT once a fragment's
# collection began (the session hands the frame back to the game), or what ends the run (a failure is said
# to the trainer first, as {"type": "error", "message": ...}).
static func answer(sync_node: Node, stream: StreamPeer, message: Dictionary) -> Reference:
	var recorder = sync_node.get_meta(META) if sync_node.has_meta(META) else null
	var error := ""
	if message[FragmentWire.TYPE_KEY] == FragmentWire.ACTORS:
		return _enter(sync_node, stream, message)
	if recorder == null:
		error = "a \"%s\" message before \"%s\": the trainer asks for in-engine actors first" \
				% [FragmentWire.FRAGMENT, FragmentWire.ACTORS]
	elif typeof(message.get(WEIGHTS_FIELD)) == TYPE_RAW_ARRAY:
		error = recorder.actors.set_weights(message[WEIGHTS_FIELD])
	else:
		var version = message.get(FragmentWire.VERSION_KEY)
		if not BlockCompiler.is_finite_number(version) or version != floor(version):
			error = "a \"%s\" request needs \"%s\": a whole number, got %s" \
					% [FragmentWire.FRAGMENT, FragmentWire.VERSION_KEY, Wire.preview(version)]
		else:
			var begun: Reference = recorder.begin(int(version))
			return Result.wait() if begun.goes_on() else _ended(stream, begun)
	if error != "":
		return _ended(stream, Result.failed(error))
	return Result.go_on()


# "actors": loads the policy, replies with the sizes, and enters actor mode (a Result, as answer()'s).
static func _enter(sync_node: Node, stream: StreamPeer, message: Dictionary) -> Reference:
	var path = message.get(FragmentWire.PATH_KEY)
	var by_name = message.get(FragmentWire.PATHS_KEY)  # several policies: {name: file}, in the order of POLICIES_KEY
	var names = message.get(FragmentWire.POLICIES_KEY, [])
	var routes = message.get(FragmentWire.AGENT_POLICIES_KEY, [])  # each agent's index in names, whatever its policy
	var num_steps = message.get(FragmentWire.NUM_STEPS_KEY)
	var seed_value = message.get(FragmentWire.SEED_KEY, 0)
	var error := ""
	var paths := []
	if typeof(names) != TYPE_ARRAY:
		names = []
		by_name = "not a list of names"
	if typeof(by_name) == TYPE_DICTIONARY and not names.empty():
		for name in names:
			if typeof(by_name.get(name)) == TYPE_STRING and by_name[name] != "":
				paths.append(by_name[name])
			elif error == "":
				error = "\"%s\" names the policy \"%s\", which \"%s\" gives no file" \
						% [FragmentWire.POLICIES_KEY, str(name), FragmentWire.PATHS_KEY]
	elif typeof(path) == TYPE_STRING and path != "":
		paths.append(path)
		names = []
	if error != "":
		pass
	elif paths.empty() or (not names.empty() and paths.size() != names.size()) or (by_name != null and names.empty()):
		error = "\"%s\" needs \"%s\": a policy file (or \"%s\": {policy name: file} with \"%s\": their names)" \
				% [FragmentWire.ACTORS, FragmentWire.PATH_KEY, FragmentWire.PATHS_KEY, FragmentWire.POLICIES_KEY]
	elif not BlockCompiler.is_finite_number(num_steps) or num_steps != floor(num_steps) or num_steps < 1:
		error = "\"%s\" needs \"%s\": a whole number of steps from 1, got %s" \
				% [FragmentWire.ACTORS, FragmentWire.NUM_STEPS_KEY, Wire.preview(num_steps)]
	elif typeof(routes) != TYPE_ARRAY or (not routes.empty() and names.empty()):
		error = "\"%s\" needs \"%s\": a list of each agent's index in \"%s\", got %s" \
				% [FragmentWire.ACTORS, FragmentWire.AGENT_POLICIES_KEY, FragmentWire.POLICIES_KEY, Wire.preview(routes)]
	elif not BlockCompiler.is_finite_number(seed_value) or seed_value != floor(seed_value):
		error = "\"%s\" needs \"%s\": a whole number, got %s" \
				% [FragmentWire.ACTORS, FragmentWire.SEED_KEY, Wire.preview(seed_value)]
	var actors := FragmentActors.new()
	if error == "":
		error = actors.load_policy(sync_node, paths, names, int(seed_value), routes)
	if error != "":
		return _ended(stream, Result.failed(error))
	var recorder := FragmentRecorder.new(sync_node, stream, actors, int(num_steps),
			message.get(FragmentWire.LOGPROB_KEY, false) == true)
	sync_node.set_meta(META, recorder)
	var reply := {
		FragmentWire.TYPE_KEY: FragmentWire.ACTORS,
		FragmentWire.WEIGHTS_KEY: actors.weight_count,
		FragmentWire.OBS_SIZE_KEY: actors.obs_size,
		FragmentWire.ACTION_SIZE_KEY: actors.action_size,
		FragmentWire.N_AGENTS_KEY: sync_node.agents.size(),
	}
	if not names.empty():
		reply[FragmentWire.SIZES_KEY] = actors.sizes
	return Result.disconnected() if Wire.write_message(stream, to_json(reply)) != OK else Result.go_on()


# Whether a fragment is being collected (then RunMode calls step() at each decision step).
static func collecting(sync_node: Node) -> bool:
	return sync_node.has_meta(META) and sync_node.get_meta(META).collecting


# One decision step of the fragment (FragmentRecorder.step()): GO_ON, or what ends the run.
static func step(sync_node: Node) -> Reference:
	var recorder = sync_node.get_meta(META)
	return _ended(recorder.stream, recorder.step())


# A message the session read (Wire.read_body()'s Result), before it is answered: in actor mode a binary
# message is the weights (wrapped in WEIGHTS_FIELD), and any other message than "actors", "fragment" and "drivers"
# (reset, action, call, env_params...) leaves actor mode and works as before (the trainer sends "actors" again to
# come back). "drivers" (driver_message.gd) keeps it: the agents the game drives are driven in actor mode too.
static func route(sync_node: Node, read: Reference) -> Reference:
	if not sync_node.has_meta(META) or not read.goes_on():
		return read
	var message = read.value
	if typeof(message) == TYPE_RAW_ARRAY:
		read.value = {FragmentWire.TYPE_KEY: FragmentWire.FRAGMENT, WEIGHTS_FIELD: message}
		return read
	var keeps := [FragmentWire.ACTORS, FragmentWire.FRAGMENT, preload("res://addons/rl_sync/driver_message.gd").MESSAGE]
	if not keeps.has(message.get(FragmentWire.TYPE_KEY)):
		sync_node.remove_meta(META)
	return read


# `result` as it is; a failure is said to the trainer first.
static func _ended(stream: StreamPeer, result: Reference) -> Reference:
	if result.is_failure():
		Wire.write_message(stream, to_json({FragmentWire.TYPE_KEY: FragmentWire.ERROR, FragmentWire.MESSAGE_KEY: result.message}))
	return result
