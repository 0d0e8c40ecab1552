extends Reference
# The engine's bounds on a policy file (block_compiler.gd's MAX_FILE_BYTES, MAX_LAYERS, MAX_SIZE and
# MAX_WEIGHTS), checked before anything costly: its bytes before it is read, its depth, widths and
# weights (counted from its arrays' sizes: a matrix's rows times its first row's length) before a
# row is checked or a script compiled. A file over them is refused in one line at once, where it
# would take a parse of gigabytes and a compile of minutes. python_trainer/engine/policy_format.py
# checks the same bounds on the trainer's side.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const Result = preload("res://addons/rl_sync/result.gd")
# A convolution's kernel is counted at most this wide here, an image's side (conv_network.gd checks it fits the image).
const MAX_KERNEL := BlockCompiler.Contract.MAX_CAMERA_SIDE
const FIX := "train a smaller network (a smaller camera image, a larger stride or narrower layers)"


# A policy file's text: a Result, GO_ON with the text, or FAILED with "policy file PATH: what is wrong"
# (it does not exist, cannot be read, or has more than MAX_FILE_BYTES bytes, and then it is not read).
static func read_text(path: String) -> Reference:
	var file := File.new()
	var problem := ""
	if not file.file_exists(path):
		problem = "the file does not exist"
	elif file.open(path, File.READ) != OK:
		problem = "the file cannot be read"
	elif file.get_len() > BlockCompiler.MAX_FILE_BYTES:
		problem = "the file holds %d bytes, beyond the engine's %d (16 for each of the %d weights a policy may hold): %s" \
				% [file.get_len(), BlockCompiler.MAX_FILE_BYTES, BlockCompiler.MAX_WEIGHTS, FIX]
	if problem != "":
		file.close()
		return Result.failed("policy file %s: %s" % [path, problem])
	var text := file.get_as_text()
	file.close()
	return Result.go_on(text)


# What is wrong with one policy's (a file's, or a bundle entry's) depth, widths or weights, or "".
static func size_problem(data: Dictionary) -> String:
	var layers = data.get("layers") if typeof(data.get("layers")) == TYPE_ARRAY else []
	var cnn = data.get("cnn") if typeof(data.get("cnn")) == TYPE_DICTIONARY else {}
	var convs = cnn.get("convs") if typeof(cnn.get("convs")) == TYPE_ARRAY else []
	if layers.size() + convs.size() > BlockCompiler.MAX_LAYERS:
		return "it has %d layers (convolutions included), beyond the engine's %d: train a shallower network" \
				% [layers.size() + convs.size(), BlockCompiler.MAX_LAYERS]
	# [name, matrix, multiplier (a convolution's kernel squared), the most rows (the LSTM's: 4 per state)]
	var matrices := []
	for l in range(layers.size()):
		matrices.append(["layer %d" % l, _entry(layers[l], "weight"), 1, BlockCompiler.MAX_SIZE])
	for i in range(convs.size()):
		var kernel = _entry(convs[i], "kernel")
		var k: int = int(clamp(kernel, 1, MAX_KERNEL)) if BlockCompiler.is_finite_number(kernel) else 1
		matrices.append(["convolution %d" % i, _entry(convs[i], "weight"), k * k, BlockCompiler.MAX_SIZE])
	matrices.append(["the CNN's dense layer", _entry(cnn.get("dense"), "weight"), 1, BlockCompiler.MAX_SIZE])
	for key in ["weight_ih", "weight_hh"]:
		matrices.append(["the LSTM's " + key, _entry(data.get("lstm"), key), 1, 4 * BlockCompiler.MAX_SIZE])
	var weights := 0
	for m in matrices:
		var rows: int = m[1].size() if typeof(m[1]) == TYPE_ARRAY else 0
		var width: int = m[1][0].size() if rows > 0 and typeof(m[1][0]) == TYPE_ARRAY else 0
		if width > BlockCompiler.MAX_SIZE:
			return "%s takes %d inputs, beyond the engine's %d: %s" % [m[0], width, BlockCompiler.MAX_SIZE, FIX]
		if rows > m[3]:
			return "%s has %d outputs, beyond the engine's %d: %s" % [m[0], rows, m[3], FIX]
		weights += rows * width * m[2]
	if weights > BlockCompiler.MAX_WEIGHTS:
		return "it holds %d weights, beyond the engine's %d: %s" % [weights, BlockCompiler.MAX_WEIGHTS, FIX]
	return ""


static func _entry(dictionary, key: String):
	return dictionary.get(key) if typeof(dictionary) == TYPE_DICTIONARY else null
