extends Reference
# Writes a camera policy's encoder (conv_network.gd checks it first) as GDScript with
# block_compiler.gd's two tricks: 3x3 Basis blocks times Vector3 chunks, and straight-line code.
#
# The values: a frame is a PoolVector3Array of one chunk per pixel (its R, G, B scaled by 1/255, or
# L, L, L for grayscale: the blocks' unused columns are zero); a convolution's output is a
# PoolVector3Array of ceil(out / 3) chunks per output pixel, row-major. Each convolution is a loop
# over its output pixels whose body is straight-line: it loads the pixel's patch into locals, then
# writes one `bias + block * patch + ...` line per chunk of output channels, so the code grows with
# the kernel, not with the image. The dense layer is straight-line (flattened in torch's C, H, W
# order, so its blocks gather the columns of each chunk). ReLU is (v + |v|) * 0.5, exact.
#
# compile() returns {"convs": a script with func encode(frames: Array) -> PoolVector3Array, the K
# frames (oldest first) in, the last convolution's output out; "dense": the scripts of the dense layer,
# each with func run(x: PoolVector3Array) -> Array for some of its output chunks (a big dense layer is
# split among several, and a row of more than BLOCKS_PER_SCRIPT blocks among parts: block_compiler.gd's
# BLOCKS_PER_SCRIPT and row_terms()); their outputs, joined
# (BlockCompiler.run_joined), are the features as ceil(features / 3) chunks, the last one zero-padded.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")


# `convs`: the checked convolutions, each {"weight", "bias", "stride", "kernel", "in_h", "in_w"};
# `dense`: {"weight", "bias"}; `channels`: a frame's (1 or 3); `frames`: K. Returns the compiled
# scripts (above), or null if the generated code does not compile (a bug here).
static func compile(convs: Array, dense: Dictionary, channels: int, frames: int):
	var code := BlockCompiler.new()
	code.line("func encode(f: Array) -> PoolVector3Array:")
	code.line("\tvar x = conv0(f)")
	for l in range(1, convs.size()):
		code.line("\tx = conv%d([x])" % l)
	code.line("\treturn x")
	var arrays := frames
	var chunks_per_pixel := 1
	for l in range(convs.size()):
		_convolution(code, l, convs[l], arrays, chunks_per_pixel, channels if l == 0 else 0)
		arrays = 1
		chunks_per_pixel = BlockCompiler.chunk_count(convs[l]["weight"].size())
	var last: Dictionary = convs[-1]
	var n_channels: int = last["weight"].size()
	var pixels := _out_side(last["in_h"], last["kernel"], last["stride"]) \
			* _out_side(last["in_w"], last["kernel"], last["stride"])
	var cost := BlockCompiler.row_cost(pixels * BlockCompiler.chunk_count(n_channels))
	for range_ in BlockCompiler.row_ranges(BlockCompiler.chunk_count(dense["weight"].size()), cost):
		code.next_script()
		_dense(code, dense, n_channels, pixels, range_[0], range_[1])
	var scripts = code.compile()
	if scripts == null:
		return null
	return {"convs": scripts[0], "dense": scripts.slice(1, scripts.size() - 1)}


static func _out_side(side: int, kernel: int, stride: int) -> int:
	return (side - kernel) / stride + 1


# The input channel that column r of chunk c of input array a holds, or -1 for padding: the first
# layer's arrays are the frames (frame a's channels a*C ... a*C + C-1), a later layer's one array
# holds the previous output, 3 channels per chunk.
static func _channel(frame_channels: int, n_in: int, a: int, c: int, r: int) -> int:
	if frame_channels > 0:
		return a * frame_channels + r if r < frame_channels else -1
	var ch := 3 * c + r
	return ch if ch < n_in else -1


static func _convolution(code, l: int, conv: Dictionary, arrays: int, chunks: int, frame_channels: int) -> void:
	var weight: Array = conv["weight"]
	var n_out := weight.size()
	var n_in: int = weight[0].size()
	var kernel: int = conv["kernel"]
	var stride: int = conv["stride"]
	var in_w: int = conv["in_w"]
	var out_h := _out_side(conv["in_h"], kernel, stride)
	var out_w := _out_side(in_w, kernel, stride)
	var out_chunks := BlockCompiler.chunk_count(n_out)
	code.line("func conv%d(f: Array) -> PoolVector3Array:" % l)
	for a in range(arrays):
		code.line("\tvar i%d: PoolVector3Array = f[%d]" % [a, a])
	code.line("\tvar o := PoolVector3Array()")
	code.line("\to.resize(%d)" % (out_h * out_w * out_chunks))
	code.line("\tvar n := 0")
	code.line("\tfor oy in range(%d):" % out_h)
	code.line("\t\tfor ox in range(%d):" % out_w)
	code.line("\t\t\tvar b: int = (oy * %d + ox * %d) * %d" % [stride * in_w, stride, chunks])
	var patch := []  # [name, a, c, ky, kx]
	for ky in range(kernel):
		for kx in range(kernel):
			for a in range(arrays):
				for c in range(chunks):
					var name := "p%d_%d_%d_%d" % [a, c, ky, kx]
					code.line("\t\t\tvar %s: Vector3 = i%d[b + %d]" % [name, a, (ky * in_w + kx) * chunks + c])
					patch.append([name, a, c, ky, kx])
	for j in range(out_chunks):
		var terms := PoolStringArray()
		for p in patch:
			var columns := []
			for r in range(3):
				var column := Vector3()
				var ch := _channel(frame_channels, n_in, p[1], p[2], r)
				for rr in range(3):
					if ch >= 0 and 3 * j + rr < n_out:
						column[rr] = float(weight[3 * j + rr][ch][p[3]][p[4]])
				columns.append(column)
			var block := Basis(columns[0], columns[1], columns[2])
			terms.append("%s * %s" % [code.basis("w%d_%d_%s" % [l, j, p[0].substr(1)], block), p[0]])
		var bias := BlockCompiler.chunk_at(conv["bias"], 0, n_out, j)
		code.sum_line("\t\t\t", "a%d" % j, code.vector("b%d_%d" % [l, j], bias), terms)
		code.line("\t\t\to[n + %d] = (a%d + a%d.abs()) * 0.5" % [j, j, j])
	code.line("\t\t\tn += %d" % out_chunks)
	code.line("\treturn o")


# The dense layer's output chunks [first, last) on the last convolution's output (`pixels` output
# pixels of `channels` channels), flattened as torch flattens (C, H, W): input column ch * pixels + pixel.
static func _dense(code, dense: Dictionary, channels: int, pixels: int, first: int, last: int) -> void:
	var weight: Array = dense["weight"]
	var n_out := weight.size()
	var chunks := BlockCompiler.chunk_count(channels)
	code.line("func run(x: PoolVector3Array) -> Array:")
	var wide := BlockCompiler.is_wide(pixels * chunks)  # then its parts read x
	var inputs := PoolStringArray()
	var part_inputs := PoolStringArray()
	for k in range(pixels * chunks):
		inputs.append("x%d" % k)
		part_inputs.append("x[%d]" % k)
		if not wide:
			code.line("\tvar x%d: Vector3 = x[%d]" % [k, k])
	var outputs := PoolStringArray()
	for bo in range(first, last):
		var blocks := []
		for pixel in range(pixels):
			for c in range(chunks):
				var columns := []
				for r in range(3):
					var column := Vector3()
					for rr in range(3):
						if 3 * c + r < channels and 3 * bo + rr < n_out:
							column[rr] = float(weight[3 * bo + rr][(3 * c + r) * pixels + pixel])
					columns.append(column)
				blocks.append(Basis(columns[0], columns[1], columns[2]))  # block k = pixel * chunks + c
		var terms: PoolStringArray = code.row_terms("d_%d" % bo, blocks, inputs, part_inputs, "x")
		var bias := BlockCompiler.chunk_at(dense["bias"], 0, n_out, bo)
		code.sum_line("\t", "h%d" % bo, code.vector("db_%d" % bo, bias), terms)
		code.line("\th%d = (h%d + h%d.abs()) * 0.5" % [bo, bo, bo])
		outputs.append("h%d" % bo)
	code.line("\treturn [%s]" % outputs.join(", "))
