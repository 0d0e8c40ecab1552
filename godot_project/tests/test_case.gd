extends Reference
# Base of every GDScript test file: assertion helpers that record failures instead of stopping.

var tree: SceneTree
var failures := []


func check(condition: bool, message: String) -> void:
	if not condition:
		failures.append(message)


# Deep equality (Godot 3 compares dictionaries by reference); int and float count as different.
func check_eq(actual, expected, what: String) -> void:
	if not deep_equal(actual, expected):
		failures.append("%s: expected %s, got %s" % [what, to_json(expected), to_json(actual)])


func deep_equal(a, b) -> bool:
	if typeof(a) != typeof(b):
		return false
	if typeof(a) == TYPE_ARRAY:
		if a.size() != b.size():
			return false
		for i in range(a.size()):
			if not deep_equal(a[i], b[i]):
				return false
		return true
	if typeof(a) == TYPE_DICTIONARY:
		if a.size() != b.size():
			return false
		for key in a:
			if not b.has(key) or not deep_equal(a[key], b[key]):
				return false
		return true
	return a == b


func check_near(actual: float, expected: float, tolerance: float, what: String) -> void:
	if abs(actual - expected) > tolerance:
		failures.append("%s: expected %f +- %f, got %f" % [what, expected, tolerance, actual])


# Waits for n physics frames, so bodies move and queries see the new state.
func physics_frames(n: int):
	for _i in range(n):
		yield(tree, "physics_frame")
