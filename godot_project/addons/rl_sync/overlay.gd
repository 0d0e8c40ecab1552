extends CanvasLayer
# On-screen text for windowed runs: what drives the agents, and how they are doing. A game of two
# teams (every agent's team 0 or 1, pong's paddles) shows each team's points instead of returns: an
# episode an arena's team ends with a positive return is one point of that team. Matches
# (--opponent, match_mode.gd) add their score and a person's side and keys.

const REFRESH_MSEC := 200

var _label := Label.new()
var _panel := ColorRect.new()
var _finished_returns := []
var _next_refresh := 0
# A game of two teams: each team's points (null: not such a game; set at the first step).
var _points = null
# --opponent's matches (match_mode.gd), when the sync node (this node's parent) plays them.
var _matches = null


func _ready() -> void:
	layer = 100
	_panel.color = Color(0, 0, 0, 0.55)
	_panel.rect_position = Vector2(6, 6)
	add_child(_panel)
	_label.rect_position = Vector2(14, 10)
	add_child(_label)
	var run = get_parent().get("_run")  # RunMode (run_mode.gd) of the sync node
	if run != null and run.policy_mode != null:
		_matches = run.policy_mode.matches


# Called by the sync node after each decision step.
func show_agents(mode_text: String, agents: Array) -> void:
	if _points == null:
		_points = [0, 0] if _two_teams(agents) else []
	var scored := {}  # "arena:team" -> true: a team's several agents in one arena make one point
	for agent in agents:
		if agent.n_steps == 0 and agent.last_episode_length > 0:
			_finished_returns.append(agent.last_episode_return)
			if not _points.empty() and agent.last_episode_return > 0.0:
				scored["%d:%d" % [agent.get_parent().get_instance_id(), int(agent.team)]] = int(agent.team)
	for team in scored.values():
		_points[team] += 1
	if _finished_returns.size() > 100:
		_finished_returns = _finished_returns.slice(_finished_returns.size() - 100, _finished_returns.size() - 1)
	if OS.get_ticks_msec() < _next_refresh:
		return
	_next_refresh = OS.get_ticks_msec() + REFRESH_MSEC
	var running := 0.0
	for agent in agents:
		running += agent.episode_return
	var lines := [
		mode_text,
		"agents: %d    fps: %d" % [agents.size(), Engine.get_frames_per_second()],
	]
	if not _points.empty():
		lines.append("points: team 0 %d, team 1 %d" % _points
				+ ("    " + _matches.score_text() if _matches != null else ""))
		if _matches != null and _matches.person_text() != "":
			lines.append("you: " + _matches.person_text())
	else:
		lines.append("episode return (mean of running episodes): %.2f" % (running / agents.size()))
	if not _finished_returns.empty() and _points.empty():
		var total := 0.0
		for r in _finished_returns:
			total += r
		lines.append("finished episodes: mean return %.2f over the last %d"
				% [total / _finished_returns.size(), _finished_returns.size()])
	_label.text = PoolStringArray(lines).join("\n")
	_panel.rect_size = _label.get_minimum_size() + Vector2(16, 8)


# Whether every agent plays on team 0 or 1, and both teams are there.
static func _two_teams(agents: Array) -> bool:
	var teams := {}
	for agent in agents:
		if not int(agent.team) in [0, 1]:
			return false
		teams[int(agent.team)] = true
	return teams.size() == 2
