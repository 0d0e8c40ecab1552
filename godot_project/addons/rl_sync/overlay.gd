extends CanvasLayer
# On-screen text for windowed runs: what drives the agents, and how they are doing.

const REFRESH_MSEC := 200

var _label := Label.new()
var _panel := ColorRect.new()
var _finished_returns := []
var _next_refresh := 0


func _ready() -> void:
	layer = 100
	_panel.color = Color(0, 0, 0, 0.55)
	_panel.rect_position = Vector2(6, 6)
	add_child(_panel)
	_label.rect_position = Vector2(14, 10)
	add_child(_label)


# Called by the sync node after each decision step.
func show_agents(mode_text: String, agents: Array) -> void:
	for agent in agents:
		if agent.n_steps == 0 and agent.last_episode_length > 0:
			_finished_returns.append(agent.last_episode_return)
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
		"episode return (mean of running episodes): %.2f" % (running / agents.size()),
	]
	if not _finished_returns.empty():
		var total := 0.0
		for r in _finished_returns:
			total += r
		lines.append("finished episodes: mean return %.2f over the last %d"
				% [total / _finished_returns.size(), _finished_returns.size()])
	_label.text = PoolStringArray(lines).join("\n")
	_panel.rect_size = _label.get_minimum_size() + Vector2(16, 8)
