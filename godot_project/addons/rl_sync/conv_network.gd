extends Reference
# A camera policy's encoder (a policy file's "image" and "cnn", version 4), for policy_runner.gd:
# checked, compiled by conv_compiler.gd, and run on an agent's frame, with one frame stack per agent.
#
#   "image": {"key": "camera_2d", "size": [H, W, C], "frame_stack": K}     C = 3 (RGB) or 1 (gray)
#   "cnn":   {"convs": [{"weight": out x in x k x k, "bias": out, "kernel": k, "stride": s}, ...],
#             "dense": {"weight": out x in, "bias": out, "activation": "relu"}}
#
# The order is the trainer's (python_trainer/variants/cnn.py): the K newest frames on the channels,
# oldest first, zeros in the older slots where an episode begins (reset()); bytes / 255; each
# convolution unpadded, then ReLU; flattened in torch's (C, H, W) order; dense, then ReLU. The
# policy's layers then take cat([these features, the normalised vector keys]).
#
# A frame (the agent's get_obs()[key], a PoolByteArray of H x W x C) becomes floats without a loop in
# GDScript: Godot's Image converts it to RGBF (each byte / 255), and those bytes, behind the header
# var2bytes() writes for a PoolVector3Array, are a PoolVector3Array of one chunk per pixel.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")
const ConvCompiler = preload("res://addons/rl_sync/conv_compiler.gd")
const Contract = preload("res://addons/rl_sync/contract.gd")
const MAX_SIDE := Contract.MAX_CAMERA_SIDE
const MAX_FRAME_STACK := Contract.MAX_FRAME_STACK
const MAX_FILTERS := 4096

var image_key := ""
var height := 0
var width := 0
var channels := 0
var frame_stack := 1
# The dense layer's outputs: the features the policy's layers read first.
var features := 0
# The encoder conv_compiler.gd compiled: {"convs": script, "dense": scripts}.
var _compiled = null
# Per agent: its K newest frames, oldest first.
var _stacks := []
var _zero := PoolVector3Array()
var _header := PoolByteArray()
var _said_size := false


# Checks the file's "image" and "cnn" and compiles the encoder; returns "" or what is wrong.
func build(image, cnn) -> String:
	var error := _read_image(image)
	if error != "":
		return error
	if typeof(cnn) != TYPE_DICTIONARY or typeof(cnn.get("convs")) != TYPE_ARRAY or cnn["convs"].empty():
		return "\"cnn\" must hold \"convs\" (a non-empty list of convolutions) and \"dense\""
	var convs := []
	var h := height
	var w := width
	var n_in := channels * frame_stack
	for i in range(cnn["convs"].size()):
		var conv = cnn["convs"][i]
		if typeof(conv) != TYPE_DICTIONARY or not BlockCompiler.is_size(conv.get("kernel")) \
				or not BlockCompiler.is_size(conv.get("stride")):
			return "the CNN's convolution %d needs \"weight\", \"bias\", a \"kernel\" and a \"stride\" (whole numbers >= 1)" % i
		var kernel := int(conv["kernel"])
		var weight = conv.get("weight")
		if typeof(weight) != TYPE_ARRAY or weight.empty() or weight.size() > MAX_FILTERS:
			return "the CNN's convolution %d needs a weight of 1 to %d filters" % [i, MAX_FILTERS]
		var first_in: int = weight[0].size() if typeof(weight[0]) == TYPE_ARRAY else -1
		if first_in != n_in:
			return "the CNN's shapes do not chain: convolution %d takes %d input channels, but %s %d" \
					% [i, first_in, "the image's frames give" if i == 0 else "convolution %d gives" % (i - 1), n_in]
		if kernel > min(h, w):
			return "the CNN's shapes do not chain: convolution %d's %d x %d kernel does not fit the %d x %d it is given" \
					% [i, kernel, kernel, h, w]
		error = _check_numbers(weight, [weight.size(), n_in, kernel, kernel], "convolution %d's weight" % i)
		if error == "":
			error = _check_numbers(conv.get("bias"), [weight.size()], "convolution %d's bias" % i)
		if error != "":
			return error
		convs.append({"weight": weight, "bias": conv["bias"], "kernel": kernel, "stride": int(conv["stride"]),
				"in_h": h, "in_w": w})
		h = (h - kernel) / int(conv["stride"]) + 1
		w = (w - kernel) / int(conv["stride"]) + 1
		n_in = weight.size()
	error = _check_dense(cnn.get("dense"), n_in, h, w)
	if error != "":
		return error
	features = cnn["dense"]["weight"].size()
	_compiled = ConvCompiler.compile(convs, cnn["dense"], channels, frame_stack)
	if _compiled == null:
		return "internal error: the generated CNN does not compile (please report it)"
	_zero.resize(height * width)
	_header = var2bytes(PoolVector3Array())
	var n := height * width
	for b in range(4):
		_header[4 + b] = (n >> (8 * b)) & 255
	return ""


func _read_image(image) -> String:
	var size = image.get("size") if typeof(image) == TYPE_DICTIONARY else null
	if typeof(image) != TYPE_DICTIONARY or typeof(image.get("key")) != TYPE_STRING or not Contract.IMAGE_KEY_MARK in image["key"] \
			or typeof(size) != TYPE_ARRAY or size.size() != 3:
		return "\"image\" must be {\"key\": a key containing \"%s\", \"size\": [H, W, C], \"frame_stack\": K}" \
				% Contract.IMAGE_KEY_MARK
	for s in [size[0], size[1]]:
		if not BlockCompiler.is_size(s) or s > MAX_SIDE:
			return "the image's height and width must be whole numbers from 1 to %d, got %s" % [MAX_SIDE, str(size)]
	if not size[2] in [1.0, 3.0]:
		return "the image's channels must be 1 (grayscale) or 3 (RGB), got %s" % str(size[2]).substr(0, 40)
	var k = image.get("frame_stack", 1)
	if not BlockCompiler.is_size(k) or k > MAX_FRAME_STACK:
		return "the image's frame_stack must be a whole number from 1 to %d, got %s" % [MAX_FRAME_STACK, str(k).substr(0, 40)]
	image_key = image["key"]
	height = int(size[0])
	width = int(size[1])
	channels = int(size[2])
	frame_stack = int(k)
	return ""


func _check_dense(dense, channels_in: int, h: int, w: int) -> String:
	var weight = dense.get("weight") if typeof(dense) == TYPE_DICTIONARY else null
	if typeof(weight) != TYPE_ARRAY or weight.empty() or weight.size() > BlockCompiler.MAX_SIZE \
			or str(dense.get("activation", "relu")) != "relu":
		return "the CNN's \"dense\" must be {\"weight\": 1 to %d rows, \"bias\", \"activation\": \"relu\"}" \
				% BlockCompiler.MAX_SIZE
	var n_in := channels_in * h * w
	var got: int = weight[0].size() if typeof(weight[0]) == TYPE_ARRAY else -1
	if got != n_in:
		return "the CNN's shapes do not chain: its dense layer takes %d inputs, but the last convolution gives %d x %d x %d = %d" \
				% [got, channels_in, h, w, n_in]
	var error := _check_numbers(weight, [weight.size(), n_in], "the CNN's dense weight")
	return error if error != "" else _check_numbers(dense.get("bias"), [weight.size()], "the CNN's dense bias")


# `values` is a nested list of exactly `shape`, finite numbers at the bottom.
static func _check_numbers(values, shape: Array, name: String, whole: String = "") -> String:
	whole = PoolStringArray(shape).join(" x ") if whole == "" else whole
	if typeof(values) != TYPE_ARRAY or values.size() != shape[0]:
		return "%s must be %s values" % [name, whole]
	if shape.size() == 1:
		for x in values:
			if not BlockCompiler.is_finite_number(x):
				return "%s holds a value that is not a finite number (NaN or infinity)" % name
		return ""
	var inner := shape.slice(1, shape.size() - 1)
	for row in values:
		var error := _check_numbers(row, inner, name, whole)
		if error != "":
			return error
	return ""


# One frame stack per agent, all zeros.
func set_agent_count(n: int) -> void:
	_stacks = []
	for agent in range(n):
		_stacks.append([])
		reset(agent)


# Agent `agent`'s episode begins: its older frames are zeros again.
func reset(agent: int) -> void:
	var stack := []
	for _k in range(frame_stack):
		stack.append(_zero)
	_stacks[agent] = stack


# The features of agent `agent`'s newest frame (its get_obs()[image_key]), in chunks; the frame joins
# its stack. A frame of another size is said once and seen as black.
func encode(frame, agent: int) -> Array:
	var stack: Array = _stacks[agent]
	stack.pop_front()
	stack.push_back(pixels(frame))
	return BlockCompiler.run_joined(_compiled["dense"], _compiled["convs"].encode(stack))


# A frame's bytes as one Vector3 per pixel, each byte / 255 (gray: L, L, L).
func pixels(frame) -> PoolVector3Array:
	if typeof(frame) != TYPE_RAW_ARRAY or frame.size() != height * width * channels:
		if not _said_size:
			_said_size = true
			printerr(Contract.ERROR_PREFIX + "the policy sees \"%s\" as %d x %d x %d bytes, the agent gives %s" % [image_key,
					height, width, channels, str(frame.size()) + " bytes" if typeof(frame) == TYPE_RAW_ARRAY else "no frame"])
		return _zero
	var image := Image.new()
	image.create_from_data(width, height, false, Image.FORMAT_RGB8 if channels == 3 else Image.FORMAT_L8, frame)
	image.convert(Image.FORMAT_RGBF)
	var data := _header
	data.append_array(image.get_data())
	return bytes2var(data)


# The vector keys of a get_obs() Dictionary (those without "2d"), in sorted key order, as the
# trainer's flat row lays them out; an Array as it is.
static func vector_values(obs) -> Array:
	if typeof(obs) != TYPE_DICTIONARY:
		return obs
	var keys: Array = obs.keys()
	keys.sort()
	var values := []
	for key in keys:
		if not Contract.IMAGE_KEY_MARK in str(key):
			values += Array(obs[key])
	return values


# Pads a matrix's columns (rows of values) at `at` with zeros up to `to`: the features' last chunk.
static func padded_columns(matrix: Array, at: int, to: int) -> Array:
	var out := []
	for row in matrix:
		var padded: Array = row.slice(0, at - 1) if at > 0 else []
		for _i in range(to - at):
			padded.append(0.0)
		padded += row.slice(at, row.size() - 1) if at < row.size() else []
		out.append(padded)
	return out
