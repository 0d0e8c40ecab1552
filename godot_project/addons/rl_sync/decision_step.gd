extends Reference
# The decision step of every agent, in the two forms a reply takes: godot-rl's JSON step (json(),
# for every mode but the binary step exchange) and our packed one (packed(), see wire.gd). Both run
# the same episode bookkeeping, end_step(), so the two formats cannot drift apart.
#
# RLSync (sync.gd) calls these through its decision_step() and decision_step_packed(). A step in which
# an episode ends is closed (close()) a frame before its reply is built, once the game's deferred calls
# have run (step_order.gd): json() and packed() take that closed step, or close it themselves.

const Wire = preload("res://addons/rl_sync/wire.gd")
const Observations = preload("res://addons/rl_sync/observations.gd")


# One agent's decision step: the step is counted, the reward earned since the last one moves into
# the episode's return (and onto `rewards`) and the time limit applies. Returns null while the
# episode goes on. When it ended, the agent starts the next one now (the reply's observation is
# the first of it), and this returns what the reply says of the ended episode, taken before the
# reset: [a copy of get_info() (a controller may return a Dictionary it keeps and clears), the last
# observation, whether the time limit ended it].
static func end_step(agent, rewards: Array):
	agent.n_steps += 1
	var reward: float = agent.reward
	agent.reward = 0.0
	agent.episode_return += reward
	rewards.append(reward)
	if not agent.done and agent.n_steps < agent.max_episode_steps:
		return null
	var ended := [agent.get_info().duplicate(true), agent.get_obs(), not agent.done]
	agent.last_episode_return = agent.episode_return
	agent.last_episode_length = agent.n_steps
	agent.begin_episode()
	return ended


# Whether end_step() would end an agent's episode now (the same test, without its effects).
static func any_ending(agents: Array) -> bool:
	for agent in agents:
		if agent.done or agent.n_steps + 1 >= agent.max_episode_steps:
			return true
	return false


# end_step() for every agent: [the rewards, what each ended episode's reply says (null: it goes on)].
static func close(agents: Array) -> Array:
	var rewards := []
	var ended := []
	for agent in agents:
		ended.append(end_step(agent, rewards))
	return [rewards, ended]


# An agent's observation size as get_obs_space() declares it (every vector key's values: an image goes
# in a block of its own), -1 when it declares none the trainer could read.
static func declared_size(agent) -> int:
	var space = agent.get_obs_space()
	if typeof(space) != TYPE_DICTIONARY or space.empty():
		return -1
	var total := 0
	for key in space:
		if Observations.is_image_key(str(key)):
			continue
		var spec = space[key]
		var size = spec.get("size", 1) if typeof(spec) == TYPE_DICTIONARY else null
		if typeof(size) in [TYPE_INT, TYPE_REAL]:
			total += int(size)
		elif typeof(size) == TYPE_ARRAY:
			var n := 1
			for d in size:
				n *= int(d)
			total += n
		else:
			return -1
	return total


# "" or which agent's observation the trainer could not read (checked once, when training begins: a
# String or a Vector2 in get_obs() would reach the trainer as 0 without a word).
static func non_number(agents: Array) -> String:
	for i in range(agents.size()):
		var problem := Observations.problem(agents[i].get_obs())
		if problem != "":
			return "agent %d (%s): %s" % [i, agents[i].get_path(), problem]
	return ""


# Which agent's observation no longer has its declared size, in one line (a bug of the game's own,
# which a restart would repeat).
static func observation_problem(agents: Array, declared: PoolIntArray) -> String:
	for i in range(agents.size()):
		var obs = Observations.vector_values(agents[i].get_obs())
		var size: int = obs.size() if typeof(obs) in [TYPE_ARRAY, TYPE_REAL_ARRAY, TYPE_INT_ARRAY] else -1
		if size != declared[i]:
			return ("agent %d (%s): get_obs() returned %s, but it declared %d values (get_obs_space(), when training "
					+ "began); an agent's observation must keep the size it declared") \
					% [i, agents[i].get_path(), "%d values" % size if size >= 0 else Wire.preview(obs), declared[i]]
	return "an agent's last observation of an episode had another size than it declared (get_obs_space())"


# godot-rl's step: {"obs": [{"obs": [...]}, ...], "reward", "done", "info"}, the info of an ended
# episode with its "terminal_observation" and "TimeLimit.truncated". `closed`: close()'s result, or null.
static func json(agents: Array, closed = null) -> Dictionary:
	if closed == null:
		closed = close(agents)
	var obs := []
	var dones := []
	var infos := []
	for i in range(agents.size()):
		var agent = agents[i]
		var ended = closed[1][i]
		if ended == null:
			var info: Dictionary = agent.get_info()
			infos.append(info)
		else:
			var info: Dictionary = ended[0]
			info["terminal_observation"] = Observations.json(ended[1])
			info["TimeLimit.truncated"] = ended[2]
			infos.append(info)
		obs.append(Observations.json(agent.get_obs()))
		dones.append(ended != null)
	return {"obs": obs, "reward": closed[0], "done": dones, "info": infos}


# The first decision step of a local mode (policy, benchmark, human), before anything was simulated:
# the observations, with no reward and no step counted.
static func first(agents: Array) -> Dictionary:
	var obs := []
	var rewards := []
	var dones := []
	var infos := []
	for agent in agents:
		obs.append(Observations.json(agent.get_obs()))
		rewards.append(0.0)
		dones.append(false)
		infos.append({})
	return {"obs": obs, "reward": rewards, "done": dones, "info": infos}


# The reply to a trainer's reset: every agent's observation now, as godot-rl's list or, when the
# handshake asked for f32_base64 (`packed`), packed like the step replies (exact to float32; images stay
# hex, in an "obs" list beside).
static func reset_reply(agents: Array, packed: bool) -> Dictionary:
	var obs := []
	for agent in agents:
		obs.append(Observations.json(agent.get_obs()))
	if not packed:
		return {Wire.Contract.TYPE_KEY: Wire.Contract.MSG_RESET, "obs": obs}
	var reply := {Wire.Contract.TYPE_KEY: Wire.Contract.MSG_RESET, "obs_f32": Wire.pack_obs(obs)}
	var images := Observations.packed_images(obs)
	if not images.empty():
		reply["obs"] = images
	return reply


# The binary step exchange's step, filled into `into` as [values, infos, frames]. values is one PoolRealArray of every
# observation's vector keys, the rewards, the statuses (Wire.STATUS_*) and the terminal observations of
# the agents whose episode ended; infos maps an ended agent's index (a String) to its get_info(), when
# that has keys (only ended agents' info reaches the trainer, so only they are asked for it); frames,
# when an agent observes an image (null otherwise), every image agent's frame in agent order, then the
# terminal frame of each ended image agent, in the order of the terminal observations.
# `declared`: each agent's observation size as its env_info declared it (declared_size()) and
# `declared_total` their sum; then observations of another size are refused, naming the agent (the
# trainer cannot tell which agent's were off from the packed values): two comparisons per step.
# `closed`: close()'s result, or null. Returns "" or what is wrong (no Result: this runs every step).
static func packed(agents: Array, into: Array, declared := PoolIntArray(), declared_total := 0, closed = null) -> String:
	if closed == null:
		closed = close(agents)
	var rewards: Array = closed[0]
	var values := PoolRealArray()
	var statuses := PoolRealArray()
	var terminal := PoolRealArray()
	var frames = null
	var terminal_frames := PoolByteArray()
	var infos := {}
	var checked := not declared.empty()
	var terminal_total := 0
	for i in range(agents.size()):
		var agent = agents[i]
		var ended = closed[1][i]
		var obs = agent.get_obs()
		if typeof(obs) == TYPE_DICTIONARY:
			var frame = Observations.image(obs)
			if frame != null:
				frames = _appended(frames, frame)
				if ended != null:
					terminal_frames.append_array(Observations.image(ended[1]))
			obs = Observations.vector_values(obs)
		if ended == null:
			statuses.append(Wire.STATUS_RUNNING)
		else:
			if not ended[0].empty():
				infos[str(i)] = ended[0]
			terminal.append_array(Observations.vector_values(ended[1]))
			statuses.append(Wire.STATUS_TRUNCATED if ended[2] else Wire.STATUS_TERMINATED)
			if checked:
				terminal_total += declared[i]
		values.append_array(obs)
	if checked and (values.size() != declared_total or terminal.size() != terminal_total):
		return observation_problem(agents, declared)
	values.append_array(PoolRealArray(rewards))
	values.append_array(statuses)
	values.append_array(terminal)
	if frames != null:
		frames.append_array(terminal_frames)
	into.append(values)  # in place: the caller's Array
	into.append(infos)
	into.append(frames)
	return ""


static func _appended(frames, frame: PoolByteArray) -> PoolByteArray:
	if frames == null:
		return frame
	frames.append_array(frame)
	return frames
