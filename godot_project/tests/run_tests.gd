extends SceneTree
# Our own small GDScript test runner (there is no GUT here).
#
#   godot3-server --path godot_project -s tests/run_tests.gd
#
# First it parse-checks every .gd file of the project, then it runs each test_*.gd file in this
# folder: every method whose name starts with "test_" is called on a fresh instance (a test may
# yield to wait for frames). It prints one line per failure and ends with "N passed, N failed";
# the exit code is the number of failures (0 = all good).

const TEST_DIR := "res://tests"

var passed := 0
var failed := 0


func _initialize() -> void:
	call_deferred("_run")


func _run() -> void:
	for path in _find_files("res://", ".gd"):
		if path == get_script().resource_path:
			continue  # this runner is compiled already, or we would not be here
		var error := _parse_check(path)
		if error == "":
			passed += 1
		else:
			_fail("parse check " + path, error)
	for path in _find_files(TEST_DIR, ".gd"):
		if path.get_file().begins_with("test_"):
			var state = _run_file(path)
			if state is GDScriptFunctionState:
				yield(state, "completed")
	print("%d passed, %d failed" % [passed, failed])
	quit(failed)


func _parse_check(path: String) -> String:
	var file := File.new()
	if file.open(path, File.READ) != OK:
		return "cannot read the file"
	var script := GDScript.new()
	script.source_code = file.get_as_text()
	file.close()
	script.resource_path = path
	var error := script.reload()
	return "" if error == OK else "does not compile (error %d; see the SCRIPT ERROR above)" % error


func _run_file(path: String):
	var script = load(path)
	if script == null or not script.can_instance():
		_fail(path, "cannot be loaded")
		return
	var names := []
	for method in script.get_script_method_list():
		if method["name"].begins_with("test_") and not method["name"] in names:
			names.append(method["name"])
	names.sort()
	for name in names:
		var test = script.new()
		test.tree = self
		var result = test.call(name)
		if result is GDScriptFunctionState:
			result = yield(result, "completed")
		if test.failures.empty():
			passed += 1
		else:
			for message in test.failures:
				_fail("%s:%s" % [path.get_file(), name], message)
		if test.has_method("cleanup"):
			test.cleanup()


func _fail(what: String, message: String) -> void:
	failed += 1
	printerr("FAILED %s: %s" % [what, message])


func _find_files(dir_path: String, suffix: String) -> Array:
	var found := []
	var dir := Directory.new()
	if dir.open(dir_path) != OK:
		return found
	dir.list_dir_begin(true, true)
	var name := dir.get_next()
	while name != "":
		var path := dir_path.plus_file(name)
		if dir.current_is_dir():
			if name != ".import":
				found += _find_files(path, suffix)
		elif name.ends_with(suffix):
			found.append(path)
		name = dir.get_next()
	dir.list_dir_end()
	found.sort()
	return found
