extends Reference
# The demonstration file of --record_demos=FILE (demo_recorder.gd): a JSON array of episodes that
# grows by appending. An episode's text replaces the array's closing "]" with ",EPISODE]", so the
# bytes of the episodes already there are never rewritten: they keep every digit they were written
# with, and an append costs the new episode's size, not the file's. The drop key takes the last
# episode of this run back by writing "]" where it began and blanks over the rest (whitespace that
# JSON allows). Numbers are written with 9 significant digits (Godot's to_json keeps 6, which turns
# 1.2e-07 into 0). A kill in the middle of one append (a few milliseconds) can cut the file's end;
# `godot-ppo train --demos` then says it ends early.

# Bytes JSON allows around its values.
const BLANKS := [32, 9, 10, 13]
const CLOSING := 93  # "]"

var path := ""
# The episodes in the file and their actions, those of earlier runs included.
var count := 0
var steps := 0
# The byte offset of the array's closing "]" (-1: no file yet), and for each episode this run
# appended, where its text begins and its actions (the drop key takes them back).
var _end := -1
var _starts := []
var _steps_of := []


# Reads an existing file once (is it a JSON array of episodes, each one the caller's `mismatch`
# accepts: a FuncRef to a function(episode) -> String), then checks that it can be written.
# Returns "" or what is wrong, in one line naming the file.
func open(file_path: String, mismatch: FuncRef) -> String:
	path = file_path
	if path.ends_with("/") or Directory.new().dir_exists(path):
		return "--record_demos=%s is a folder: give a file in it, e.g. --record_demos=%s" % [path, path.plus_file("demos.json")]
	var file := File.new()
	if not file.file_exists(path):
		return _check_new()
	if file.open(path, File.READ) != OK:
		return "--record_demos=%s: the file exists but cannot be read; fix its permissions or choose another file" % path
	var text := file.get_as_text()
	_end = _closing_bracket(file)
	file.close()
	if text.strip_edges() == "":
		return "--record_demos=%s: the file is empty, not a JSON array of episodes; delete it or choose another file" % path
	var parsed := JSON.parse(text)
	if parsed.error != OK or typeof(parsed.result) != TYPE_ARRAY or _end < 0:
		return "--record_demos=%s: not a JSON array of episodes (line %d: %s); recording would overwrite it: move it away or choose another file" % [
				path, parsed.error_line, parsed.error_string]
	for i in range(parsed.result.size()):
		var why: String = mismatch.call_func(parsed.result[i])
		if why != "":
			return "--record_demos=%s: episode %d %s; recordings of one game and spaces only go in one file: choose another file" % [path, i, why]
		steps += parsed.result[i][1].size()
	count = parsed.result.size()
	if file.open(path, File.READ_WRITE) != OK:
		return "--record_demos=%s cannot be written: fix its permissions or choose another file" % path
	file.close()
	return ""


# The offset of the last byte that is not a blank, when it is "]"; else -1.
static func _closing_bracket(file: File) -> int:
	var pos := file.get_len() - 1
	while pos >= 0:
		file.seek(pos)
		var byte := file.get_8()
		if not byte in BLANKS:
			return pos if byte == CLOSING else -1
		pos -= 1
	return -1


# Fails now, not at the first episode's end, when the file cannot be created.
func _check_new() -> String:
	var file := File.new()
	var error := file.open(path + ".tmp", File.WRITE)
	if error != OK:
		return "--record_demos=%s cannot be written (error %d): choose a file in a folder you can write to" % [path, error]
	file.close()
	Directory.new().remove(path + ".tmp")
	return ""


# Appends one episode ([observations, actions, meta]); "" or what went wrong.
func append(episode: Array) -> String:
	var file := File.new()
	var text := to_text(episode) + "]"
	var error := OK
	if _end < 0:  # a new file
		error = file.open(path, File.WRITE)
		text = "[" + text
	else:
		error = file.open(path, File.READ_WRITE)
		if count > 0:
			text = "," + text
	if error == OK:
		var start := int(max(_end, 1))
		if _end >= 0:
			file.seek(_end)
		file.store_string(text)
		error = file.get_error()
		if error == OK:
			_starts.append(start)
			_steps_of.append(episode[1].size())
			_end = file.get_position() - 1
			count += 1
			steps += episode[1].size()
		file.close()
	if error != OK:
		return "--record_demos=%s: could not write episode %d (error %d); the file keeps the episodes written before it: free some space or choose another file" % [
				path, count, error]
	return ""


# Takes back the last episode this run appended; "" or what went wrong.
func drop_last() -> String:
	var file := File.new()
	if _starts.empty() or file.open(path, File.READ_WRITE) != OK:
		return "--record_demos=%s: could not drop the last episode; edit the file to drop it" % path
	var start: int = _starts.pop_back()
	var blanks := " "
	while blanks.length() < _end - start:
		blanks += blanks
	file.seek(start)
	file.store_string("]" + blanks.substr(0, _end - start))
	file.close()
	_end = start
	count -= 1
	steps -= _steps_of.pop_back()
	return ""


# A value as JSON, its floats with 9 significant digits (number()).
static func to_text(value) -> String:
	var kind := typeof(value)
	if kind == TYPE_REAL:
		return number(value)
	if kind in [TYPE_ARRAY, TYPE_REAL_ARRAY, TYPE_INT_ARRAY]:
		var parts := PoolStringArray()
		for item in value:
			parts.append(to_text(item))
		return "[" + parts.join(",") + "]"
	if kind == TYPE_DICTIONARY:
		var parts := PoolStringArray()
		for key in value:
			parts.append(to_json(str(key)) + ":" + to_text(value[key]))
		return "{" + parts.join(",") + "}"
	return to_json(value)


# A finite float as JSON: an integer as one, else 9 significant digits, trailing zeros dropped.
static func number(x: float) -> String:
	if x == floor(x) and abs(x) < 1e15:
		return str(int(x))
	var e := int(floor(log(abs(x)) / log(10.0)))
	if e >= -5 and e < 15:
		return _trimmed(("%." + str(max(8 - e, 0)) + "f") % x)
	return _trimmed("%.8f" % (x / pow(10.0, e))) + "e" + str(e)


static func _trimmed(text: String) -> String:
	if text.find(".") == -1:
		return text
	text = text.rstrip("0")
	return text.rstrip(".")
