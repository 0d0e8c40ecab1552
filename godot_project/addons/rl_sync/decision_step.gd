extends Reference
# The decision step of every agent, in the two forms a reply takes: godot-rl's JSON step (json(),
# for every mode but the binary step exchange) and our packed one (packed(), see wire.gd). Both run
# the same episode bookkeeping, end_step(), so the two formats cannot drift apart.
#
# RLSync (sync.gd) calls these through its decision_step() and decision_step_packed().

const Wire = preload("res://addons/rl_sync/wire.gd")


# One agent's decision step: the step is counted, the reward earned since the last one moves into
# the episode's return (and onto `rewards`) and the time limit applies. Returns null while the
# episode goes on. When it ended, the agent starts the next one at once (the reply's observation is
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


# godot-rl's step: {"obs": [{"obs": [...]}, ...], "reward", "done", "info"}, the info of an ended
# episode with its "terminal_observation" and "TimeLimit.truncated".
static func json(agents: Array) -> Dictionary:
	var obs := []
	var rewards := []
	var dones := []
	var infos := []
	for agent in agents:
		var ended = end_step(agent, rewards)
		if ended == null:
			var info: Dictionary = agent.get_info()
			infos.append(info)
		else:
			var info: Dictionary = ended[0]
			info["terminal_observation"] = {"obs": ended[1]}
			info["TimeLimit.truncated"] = ended[2]
			infos.append(info)
		obs.append({"obs": agent.get_obs()})
		dones.append(ended != null)
	return {"obs": obs, "reward": rewards, "done": dones, "info": infos}


# The first decision step of a local mode (policy, benchmark, human), before anything was simulated:
# the observations, with no reward and no step counted.
static func first(agents: Array) -> Dictionary:
	var obs := []
	var rewards := []
	var dones := []
	var infos := []
	for agent in agents:
		obs.append({"obs": agent.get_obs()})
		rewards.append(0.0)
		dones.append(false)
		infos.append({})
	return {"obs": obs, "reward": rewards, "done": dones, "info": infos}


# The binary step exchange's step: [values, infos]. values is one PoolRealArray of every observation,
# the rewards, the statuses (Wire.STATUS_*) and the terminal observations of the agents whose episode
# ended; infos maps an ended agent's index (a String) to its get_info(), when that has keys. Only
# ended agents' info reaches the trainer, so only they are asked for it.
static func packed(agents: Array) -> Array:
	var values := PoolRealArray()
	var rewards := []
	var statuses := PoolRealArray()
	var terminal := PoolRealArray()
	var infos := {}
	for i in range(agents.size()):
		var agent = agents[i]
		var ended = end_step(agent, rewards)
		if ended == null:
			statuses.append(Wire.STATUS_RUNNING)
		else:
			if not ended[0].empty():
				infos[str(i)] = ended[0]
			terminal.append_array(ended[1])
			statuses.append(Wire.STATUS_TRUNCATED if ended[2] else Wire.STATUS_TERMINATED)
		values.append_array(agent.get_obs())
	values.append_array(PoolRealArray(rewards))
	values.append_array(statuses)
	values.append_array(terminal)
	return [values, infos]
