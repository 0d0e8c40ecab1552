extends Reference
# --policy=FILE --opponent=FILE|random|scripted|human: matches of one team against the other, the
# policy playing one side of each match and the opponent the other (agent_driver.gd drives each
# side). A game of two sides gives each agent a `team`, 0 or 1; its arenas (each agent's parent
# node: a pong court) hold the matches, and a match is one episode of the policy's agents of an
# arena (a game ends a match for both sides at once, as pong does).
#
# Sides: arena k starts with the policy on team k % 2, and the sides swap after each match of that
# arena, so with --eval_episodes=N (split among the arenas like policy_mode.gd's episodes) the policy
# plays each side in half of the matches (within one per arena). A person (--opponent=human) keeps
# their side: in arena 0, team 1 (pong's right paddle, the arrow keys). Then it prints one line
#   {"eval": {"wins", "losses", "draws", "episodes", "win_rate", ...}}
# from the policy's side: a win is a positive return of the policy's agents in that match, a loss a
# negative one, a draw zero (the time limit). See report() for every key.
# In a window the overlay shows every match's score (score_text()); a person's side and the keys it
# reads from the game's Input Map (person_text(), also said on stderr at start as PERSON_LINE).

const Contract = preload("res://addons/rl_sync/contract.gd")
const PolicySet = preload("res://addons/rl_sync/policy_set.gd")
const AgentDriver = preload("res://addons/rl_sync/agent_driver.gd")
const InputActions = preload("res://addons/rl_sync/input_actions.gd")

# The stderr line that says a person's side and keys (python_trainer/tools/play.py reads it).
const PERSON_LINE := Contract.PERSON_LINE
# Script variables (PROPERTY_USAGE_SCRIPT_VARIABLE): where a controller keeps its InputActions.
const SCRIPT_VARIABLE := 8192

var policy: AgentDriver = AgentDriver.new()
var opponent: AgentDriver = AgentDriver.new()

var _sync: Node
var _agents: Array
var _seed := 0
# Per agent: its team and its arena's index.
var _team_of := []
var _arena_of := []
# Per arena: the team the policy plays in its current match, and the matches it has left to count.
var _policy_team := []
var _quota := []
# One entry per counted match: {"return", "length", "team"} (the policy's team).
var _matches := []
# Every match that ended, counted or not (the window's score): the policy's wins, its losses, draws.
var _score := [0, 0, 0]


func _init(sync_node: Node, seed_value: int) -> void:
	_sync = sync_node
	_agents = sync_node.agents
	_seed = seed_value


# Checks the teams and loads both sides; with N > 0 matches to play, splits them among the arenas.
# Returns "" or what is wrong, in one line.
func start(policy_arg: String, opponent_arg: String, episodes: int) -> String:
	var error := _find_arenas()
	if error != "":
		return error
	var specs := PolicySet.agent_specs(_agents, _sync.action_spaces, _sync.get_parent())
	var env: String = _sync.env_name
	error = policy.setup("policy", policy_arg, [AgentDriver.RANDOM, AgentDriver.SCRIPTED], env, _agents, specs, _seed)
	if error == "":
		var words := [AgentDriver.RANDOM, AgentDriver.SCRIPTED, AgentDriver.HUMAN]
		error = opponent.setup("opponent", opponent_arg, words, env, _agents, specs, _seed + 1)
	var n_arenas := _policy_team.size()
	for k in range(n_arenas):
		_quota.append(episodes / n_arenas + (1 if k < episodes % n_arenas else 0) if episodes > 0 else -1)
	if error == "" and opponent.kind == AgentDriver.HUMAN:
		printerr(PERSON_LINE + person_text())
	return error


# Every agent in team 0 or 1, both teams in every arena; returns "" or what is wrong.
func _find_arenas() -> String:
	var arenas := []
	var teams_in := []
	for agent in _agents:
		if not int(agent.team) in [0, 1]:
			return ("--opponent plays the agents of team 0 against those of team 1, but %s's agent %s has team %d: "
					+ "give each agent of a two-sided game its side (agent_controller.gd's `team`, 0 or 1)") \
					% [_sync.env_name, str(_sync.get_parent().get_path_to(agent)), int(agent.team)]
		var arena: Node = agent.get_parent()
		var k := arenas.find(arena)
		if k == -1:
			k = arenas.size()
			arenas.append(arena)
			teams_in.append({})
		teams_in[k][int(agent.team)] = true
		_team_of.append(int(agent.team))
		_arena_of.append(k)
	for k in range(arenas.size()):
		if teams_in[k].size() != 2:
			return ("--opponent plays team 0 against team 1 in each arena, but %s's arena %s holds only team %d: "
					+ "put the agents of both teams under each arena's node") \
					% [_sync.env_name, str(_sync.get_parent().get_path_to(arenas[k])), teams_in[k].keys()[0]]
		_policy_team.append(k % 2)
	return ""


# One decision step of every agent. Returns true once the matches are all played and reported.
func step() -> bool:
	var results: Dictionary = _sync.decision_step()
	var ended := {}  # arena -> true when its match ended this step
	for i in range(_agents.size()):
		if results["done"][i]:
			ended[_arena_of[i]] = true
			policy.reset(i)
			opponent.reset(i)
	for k in ended:
		_count_match(k)
		if opponent.kind != AgentDriver.HUMAN:
			_policy_team[k] = 1 - _policy_team[k]
	for i in range(_agents.size()):
		var side: AgentDriver = policy if _team_of[i] == _policy_team[_arena_of[i]] else opponent
		# through RLSync.act(), so --record_demos records the match's actions too
		_sync.act(i, side.act(_agents[i], i, results["obs"][i]["obs"], _sync.action_spaces[i]))
	if _quota.empty() or _quota.max() != 0:
		return false
	print(to_json({Contract.EVAL_REPORT: report()}))
	return true


# The match of arena `k` that just ended: the policy's agents' returns summed (those that ended it).
func _count_match(k: int) -> void:
	var total := 0.0
	var length := 0
	var played := false
	for i in range(_agents.size()):
		if _arena_of[i] == k and _team_of[i] == _policy_team[k] and _agents[i].n_steps == 0:
			total += _agents[i].last_episode_return
			length = max(length, _agents[i].last_episode_length)
			played = true
	if not played:
		return
	_score[0 if total > 0.0 else (1 if total < 0.0 else 2)] += 1
	if _quota[k] > 0:
		_quota[k] -= 1
		_matches.append({"return": total, "length": length, "team": _policy_team[k]})


# The evaluation's report, from the policy's side: wins, losses, draws and episodes (matches);
# win_rate (wins over decided matches, null when none was decided); mean_return; returns and
# lengths per match; by_team {"0": {...}, "1": {...}}: the same counts for the matches the policy
# played on each team; and what played (env, policy, opponent, seed).
func report() -> Dictionary:
	var result := _counts(_matches)
	var returns := []
	var lengths := []
	for m in _matches:
		returns.append(m["return"])
		lengths.append(m["length"])
	var by_team := {}
	for team in [0, 1]:
		var on_team := []
		for m in _matches:
			if m["team"] == team:
				on_team.append(m)
		by_team[str(team)] = _counts(on_team)
	result["returns"] = returns
	result["lengths"] = lengths
	result["by_team"] = by_team
	result["env"] = _sync.env_name
	result["policy"] = policy.text
	result["opponent"] = opponent.text
	result["seed"] = _seed
	return result


static func _counts(matches: Array) -> Dictionary:
	var wins := 0
	var losses := 0
	var total := 0.0
	for m in matches:
		total += m["return"]
		wins += 1 if m["return"] > 0.0 else 0
		losses += 1 if m["return"] < 0.0 else 0
	return {
		"wins": wins,
		"losses": losses,
		"draws": matches.size() - wins - losses,
		"episodes": matches.size(),
		"win_rate": float(wins) / (wins + losses) if wins + losses > 0 else null,
		"mean_return": total / max(matches.size(), 1),
	}


# The overlay's words: what plays against what.
func label() -> String:
	return "%s vs %s" % [policy.label(), opponent.label()]


# The overlay's score of the matches played so far, from the policy's side.
func score_text() -> String:
	var them := "you" if opponent.kind == AgentDriver.HUMAN else "opponent"
	return "matches: policy %d, %s %d, draws %d" % [_score[0], them, _score[1], _score[2]]


# A person's side (arena 0's opponent team) and the keys of the game's input actions it reads; "" without one.
func person_text() -> String:
	if opponent.kind != AgentDriver.HUMAN or _policy_team.empty():
		return ""
	var team := 1 - int(_policy_team[0])
	var actions := []
	for i in range(_agents.size()):
		if _arena_of[i] == 0 and _team_of[i] == team:
			for action in input_actions_of(_agents[i]):
				if not action in actions:
					actions.append(action)
	var keys := keys_text(actions) if not actions.empty() else \
			"your side's controller names no input action (give it get_input_actions() or an InputActions)"
	return "team %d in arena 0; %s" % [team, keys]


# The game's input actions a controller's keyboard play reads: its get_input_actions() (optional:
# an Array of the Input Map's action names), else those of an InputActions (input_actions.gd) it holds.
static func input_actions_of(agent: Node) -> Array:
	if agent.has_method("get_input_actions"):
		return agent.get_input_actions()
	for property in agent.get_property_list():
		var value = agent.get(property["name"]) if property["usage"] & SCRIPT_VARIABLE else null
		if value is Object and value.get_script() == InputActions:
			var actions := []
			for key in value.keys:
				actions += value.keys[key]["actions"]
			return actions
	return []


# "action: key/key, ..." of the Input Map's events of each action.
static func keys_text(actions: Array) -> String:
	var parts := []
	for action in actions:
		var names := []
		for event in (InputMap.get_action_list(action) if InputMap.has_action(action) else []):
			if event is InputEventKey:
				names.append(OS.get_scancode_string(event.scancode))
			elif event is InputEventJoypadButton:
				names.append("joypad button %d" % event.button_index)
			elif event is InputEventJoypadMotion:
				names.append("joypad axis %d" % event.axis)
			elif event is InputEventMouseButton:
				names.append("mouse button %d" % event.button_index)
		parts.append("%s: %s" % [action, PoolStringArray(names).join("/") if not names.empty() else "no key"])
	return "keys: " + PoolStringArray(parts).join(", ")
