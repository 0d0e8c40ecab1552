extends Reference
# --policy_reload: keeps a --policy file's network up to date while the file changes (`godot-ppo train
# --watch` rewrites the run's policy.json at every checkpoint, and the window shows the agent improve).
#
# poll() is cheap enough to call every decision step: a few times a second (CHECK_EVERY_MSEC) it asks for
# the file's modification time. File.get_modified_time has a resolution of one second, so while the time is
# that of the last second or two the file's text is read and compared as well: a second write in the same
# second is not missed. A changed text is loaded into a fresh PolicyRunner and checked against the agent;
# only a file that loads and fits replaces the policy. A half-written, damaged or mismatched file keeps the
# previous policy (one warning line) and is tried again when it changes next: never an error, never a quit.

const PolicyRunner = preload("res://addons/rl_sync/policy_runner.gd")

const CHECK_EVERY_MSEC := 250
# While the file's time is within this many seconds of now, its text is compared too (see above).
const RECENT_S := 2

var path := ""
# How many times a new policy was loaded, and how many changed files were refused.
var reloads := 0
var refused := 0

var _game := ""
var _obs_size := 0
var _action_space := {}
var _file := File.new()
var _mtime := -1
var _text := ""
var _next_check_msec := 0


# `text`: the content the current policy was loaded from (the next poll compares against it).
func _init(file_path: String, game: String, obs_size: int, action_space: Dictionary, text: String) -> void:
	path = file_path
	_game = game
	_obs_size = obs_size
	_action_space = action_space
	_text = text
	_mtime = _modified_time()


# Returns a new PolicyRunner when the file changed to a valid policy that fits the agent, else null.
# `now_msec`: OS.get_ticks_msec() (tests pass their own clock).
func poll(now_msec: int):
	if now_msec < _next_check_msec:
		return null
	_next_check_msec = now_msec + CHECK_EVERY_MSEC
	var mtime := _modified_time()
	if mtime < 0:
		return null  # the file is gone for now (moved away, being replaced): keep playing
	if mtime == _mtime and OS.get_unix_time() > mtime + RECENT_S:
		return null
	_mtime = mtime
	var text := _read()
	if text == _text:
		return null
	_text = text
	var runner := PolicyRunner.new()
	runner.path = path
	var error := runner.load_text(text)
	if error == "":
		error = runner.check_agent(_game, _obs_size, _action_space)
	if error != "":
		refused += 1
		printerr("rl_sync: warning: policy not reloaded, the previous one keeps playing: " + error)
		return null
	reloads += 1
	var step = runner.source.get("global_step")
	# With the window's frame rate, so a log shows how the watched game kept up. On stderr: stdout is
	# block-buffered when it is a pipe or a file (Godot 3.2 cannot flush it), so the line would come late.
	printerr("rl_sync: policy reloaded (global step %s, %d fps)" % [
			str(int(step)) if typeof(step) in [TYPE_INT, TYPE_REAL] else "?", int(Engine.get_frames_per_second())])
	return runner


# The file's text, "" when it cannot be read.
static func read_text(file_path: String) -> String:
	var file := File.new()
	if file.open(file_path, File.READ) != OK:
		return ""
	var text := file.get_as_text()
	file.close()
	return text


func _read() -> String:
	return read_text(path)


# Seconds since the epoch, or -1 when the file does not exist (get_modified_time would print an error).
func _modified_time() -> int:
	if not _file.file_exists(path):
		return -1
	return _file.get_modified_time(path)
