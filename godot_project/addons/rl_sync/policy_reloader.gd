extends Reference
# --policy_reload: keeps a --policy file's network up to date while the file changes (`godot-ppo train
# --watch` rewrites the run's policy.json at every checkpoint, and the window shows the agent improve).
#
# poll() is cheap enough to call every decision step: a few times a second (CHECK_EVERY_MSEC) it asks for
# the file's modification time. File.get_modified_time has a resolution of one second, so while the time is
# that of the last second or two the file's text is read and compared as well: a second write in the same
# second is not missed. A changed text goes to the policy set (policy_set.gd: a bundle reloads all its
# policies), which loads it and checks it against the agents; only a file that loads and fits replaces
# its networks. A half-written, damaged or mismatched file keeps the previous policy (one warning line)
# and is tried again when it changes next: never an error, never a quit.

const Contract = preload("res://addons/rl_sync/contract.gd")
const PolicyLimits = preload("res://addons/rl_sync/policy_limits.gd")
const Result = preload("res://addons/rl_sync/result.gd")
const CHECK_EVERY_MSEC := 250
# While the file's time is within this many seconds of now, its text is compared too (see above).
const RECENT_S := 2

var path := ""
# How many times a new policy was loaded, and how many changed files were refused.
var reloads := 0
var refused := 0

# The PolicySet the file's networks belong to: reload_text(path, text) and source_of(path).
var _policies: Reference
var _file := File.new()
var _mtime := -1
var _text := ""
var _next_check_msec := 0


# `text`: the content the current policy was loaded from (the next poll compares against it).
func _init(file_path: String, policies: Reference, text: String) -> void:
	path = file_path
	_policies = policies
	_text = text
	_mtime = _modified_time()


# True when the file changed to valid policies that fit the agents (they play from now on).
# `now_msec`: OS.get_ticks_msec() (tests pass their own clock).
func poll(now_msec: int) -> bool:
	if now_msec < _next_check_msec:
		return false
	_next_check_msec = now_msec + CHECK_EVERY_MSEC
	var mtime := _modified_time()
	if mtime < 0:
		return false  # the file is gone for now (moved away, being replaced): keep playing
	if mtime == _mtime and OS.get_unix_time() > mtime + RECENT_S:
		return false
	_mtime = mtime
	var read: Result = PolicyLimits.read_text(path)  # a file over the engine's bounds is not read: its error is compared
	var text: String = read.message if read.is_failure() else read.value
	if text == _text:
		return false
	_text = text
	var error: String = read.message if read.is_failure() else _policies.reload_text(path, text)
	if error != "":
		refused += 1
		printerr(Contract.WARNING_PREFIX + "policy not reloaded, the previous one keeps playing: " + error)
		return false
	reloads += 1
	var step = _policies.source_of(path).get("global_step")
	# With the window's frame rate, so a log shows how the watched game kept up. On stderr: stdout is
	# block-buffered when it is a pipe or a file (Godot 3.2 cannot flush it), so the line would come late.
	printerr(Contract.RELOAD_LINE + "%s, %d fps)" % [
			str(int(step)) if typeof(step) in [TYPE_INT, TYPE_REAL] else "?", int(Engine.get_frames_per_second())])
	return true


# The file's text, "" when it cannot be read (or is over the engine's bounds).
static func read_text(file_path: String) -> String:
	var read: Result = PolicyLimits.read_text(file_path)
	return read.value if read.goes_on() else ""


# Seconds since the epoch, or -1 when the file does not exist (get_modified_time would print an error).
func _modified_time() -> int:
	if not _file.file_exists(path):
		return -1
	return _file.get_modified_time(path)
