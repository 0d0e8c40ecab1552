extends Reference
# One fragment of actor mode (fragment_mode.gd), collected step by step as the game runs: at each decision
# step every agent's raw observation, its sampled action (fragment_actors.gd, applied through the
# controller as the trainer's actions are), then, at the next decision step, the rewards, the statuses and
# the final observations of the ended episodes, with the same bookkeeping as the trainer's steps
# (decision_step.gd: the time limit, the same-step reset, the step order of an ending episode). After
# num_steps steps, the tail observations; then the header and the body in parts (fragment_wire.gd).
# Each call returns a Result (result.gd): GO_ON, or what ends the run.

const FragmentWire = preload("res://addons/rl_sync/fragment_wire.gd")
const DecisionStep = preload("res://addons/rl_sync/decision_step.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")
const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")

# The float32 values one part carries at most, so that its message stays within the limit.
const PART_FLOATS := (Wire.MAX_MESSAGE_BYTES - Wire.PACKED_HEADER_BYTES) / 4

var collecting := false
var stream: StreamPeer
var actors
# The most values per part (PART_FLOATS; tests make it smaller: --fragment_part_floats).
var part_floats := PART_FLOATS

var _sync: Node
var _agents: Array
var _num_steps := 0
var _logprob := false
var _version := 0
var _t := 0
var _body := PoolRealArray()
var _episodes := []
var _next_alive := 0


func _init(sync_node: Node, to: StreamPeer, fragment_actors, num_steps: int, logprob: bool) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	stream = to
	actors = fragment_actors
	_num_steps = num_steps
	_logprob = logprob
	var smaller := int(preload("res://addons/rl_sync/rl_args.gd").get_string("fragment_part_floats", "0"))
	if smaller > 0:
		part_floats = min(smaller, PART_FLOATS)


# Starts fragment `version`: the first step's observations and actions (the game then simulates them).
func begin(version: int) -> Reference:
	_version = version
	_t = 0
	_body = PoolRealArray()
	_episodes = []
	_next_alive = OS.get_ticks_msec() + int(FragmentWire.ALIVE_PERIOD_S * 1000)
	collecting = true
	return _act()


# A decision step: the results of the actions chosen at the last one, then the next actions or, after the
# fragment's last step, the tail and the fragment sent.
func step() -> Reference:
	var problem := preload("res://addons/rl_sync/scene_copies.gd").problem()  # a copy's (input_watch.gd), as a step's
	if problem != "":
		collecting = false
		return Result.failed(problem)
	var closed = _sync.order.take_closed()  # a step in which an episode ended was closed a frame before
	if closed == null:
		closed = DecisionStep.close(_agents)
	var statuses := PoolRealArray()
	var finals := PoolRealArray()
	for i in range(_agents.size()):
		var ended = closed[1][i]
		if ended == null:
			statuses.append(FragmentWire.STATUS_RUNNING)
			continue
		statuses.append(FragmentWire.STATUS_TRUNCATED if ended[2] else FragmentWire.STATUS_TERMINATED)
		# every ended episode's last observation, as a step's reply carries it: a truncated one is bootstrapped
		# from, and a curiosity bonus (--rnd) rates the observation reached however the episode ended
		var final_obs = Observations.vector_values(ended[1])
		if final_obs.size() != actors.obs_sizes[i]:
			return _size_problem(i, final_obs.size())
		finals.append_array(final_obs)
		_episodes.append({
			FragmentWire.AGENT_KEY: i,
			FragmentWire.RETURN_KEY: _agents[i].last_episode_return,
			FragmentWire.LENGTH_KEY: _agents[i].last_episode_length,
			FragmentWire.INFO_KEY: ended[0],
		})
	_body.append_array(PoolRealArray(closed[0]))
	_body.append_array(statuses)
	_body.append_array(finals)
	if _logprob:
		_body.append_array(actors.logprobs)
		actors.logprobs = PoolRealArray()
	_t += 1
	if _t == _num_steps:
		collecting = false
		for i in range(_agents.size()):
			var obs = Observations.vector_values(_agents[i].get_obs())
			if obs.size() != actors.obs_sizes[i]:
				return _size_problem(i, obs.size())
			_body.append_array(obs)
		return _send()
	if OS.get_ticks_msec() >= _next_alive:
		_next_alive = OS.get_ticks_msec() + int(FragmentWire.ALIVE_PERIOD_S * 1000)
		var alive := {FragmentWire.TYPE_KEY: FragmentWire.ALIVE, FragmentWire.STEP_KEY: _t}
		if Wire.write_message(stream, to_json(alive)) != OK:
			return Result.disconnected()
	return _act()


# Every agent's raw observation onto the body, then every agent's sampled action, each given to its
# controller as the trainer's would be; the agents a "drivers" message gave the game get its own action over it.
func _act() -> Reference:
	var rows := []
	for i in range(_agents.size()):
		var obs = Observations.vector_values(_agents[i].get_obs())
		if obs.size() != actors.obs_sizes[i]:
			return _size_problem(i, obs.size())
		_body.append_array(obs)
		rows.append(Array(obs))
	actors.actions = PoolRealArray()
	for i in range(_agents.size()):
		_agents[i].set_action(actors.act(i, rows[i], _logprob))
	_body.append_array(actors.actions)  # as sampled, also for the agents the game drives (they train nobody)
	preload("res://addons/rl_sync/driver_message.gd").act_for(_sync)  # then theirs, as after a trainer's actions
	return Result.new(Result.Kind.GO_ON)  # new(), not go_on(): no load() at every step


# The header, then the body in parts of at most part_floats values (var2bytes of a PoolRealArray each).
func _send() -> Reference:
	var floats := _body.size()
	var parts := int(ceil(float(floats) / part_floats))
	var header := {
		FragmentWire.TYPE_KEY: FragmentWire.FRAGMENT,
		FragmentWire.VERSION_KEY: _version,
		FragmentWire.PARTS_KEY: parts,
		FragmentWire.FLOATS_KEY: floats,
		FragmentWire.EPISODES_KEY: _episodes,
	}
	if Wire.write_message(stream, to_json(header)) != OK:
		return Result.disconnected()
	var bytes := var2bytes(_body)  # the header of all F values, then their bytes: each part is a slice of them
	for p in range(parts):
		var from: int = p * part_floats
		var count: int = min(part_floats, floats - from)
		var packet := PoolByteArray()
		for word in [Wire.PACKED_HEADER_BYTES + 4 * count, TYPE_REAL_ARRAY, count]:
			packet.append_array(PoolByteArray([word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, (word >> 24) & 0xFF]))
		packet.append_array(bytes.subarray(Wire.PACKED_HEADER_BYTES + 4 * from, Wire.PACKED_HEADER_BYTES + 4 * (from + count) - 1))
		if stream.put_data(packet) != OK:
			return Result.disconnected()
	_body = PoolRealArray()
	_episodes = []
	return Result.go_on()


func _size_problem(i: int, size: int) -> Reference:
	collecting = false
	return Result.failed(("agent %d (%s): get_obs() gave %d values, but the policy takes %d; an agent's observation "
			+ "must keep the size it declared") % [i, _agents[i].get_path(), size, actors.obs_sizes[i]])
