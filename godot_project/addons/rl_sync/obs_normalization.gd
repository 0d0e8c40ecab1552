extends Reference
# A policy file's "obs_normalization": the observation statistics the trainer normalised with, so the
# network in the engine sees what it saw in training:
#   x = clip((obs - mean) / sqrt(var + epsilon), -clip, clip)
# policy_runner.gd reads it from the file and applies it before every forward pass.

const BlockCompiler = preload("res://addons/rl_sync/block_compiler.gd")

var mean := []
# 1 / sqrt(var + epsilon), per observation.
var scale := []
var clip := 0.0
var epsilon := 1e-8


# Reads {"mean", "var", "epsilon", "clip"} for n observations; returns "" or what is wrong.
func read(norm, n: int) -> String:
	if typeof(norm) != TYPE_DICTIONARY or typeof(norm.get("mean")) != TYPE_ARRAY \
			or typeof(norm.get("var")) != TYPE_ARRAY:
		return "obs_normalization needs \"mean\" and \"var\" lists"
	if norm["mean"].size() != n or norm["var"].size() != n:
		return "obs_normalization has %d means and %d variances for %d observations" \
				% [norm["mean"].size(), norm["var"].size(), n]
	epsilon = float(norm.get("epsilon", 1e-8))
	clip = float(norm.get("clip", 10.0))
	mean = []
	scale = []
	for i in range(n):
		var m = norm["mean"][i]
		var variance = norm["var"][i]
		if not BlockCompiler.is_finite_number(m) or not BlockCompiler.is_finite_number(variance) or variance < 0:
			return "obs_normalization holds a value that is not a finite number (index %d)" % i
		mean.append(float(m))
		scale.append(1.0 / sqrt(float(variance) + epsilon))
	return ""


func apply(obs: Array) -> Array:
	var x := []
	for i in range(mean.size()):
		x.append(clamp((obs[i] - mean[i]) * scale[i], -clip, clip))
	return x


# New statistics (the in-engine actors' weights message): the n means, then the n variances, from
# values[at]; epsilon and clip stay the file's.
func set_stats(values: PoolRealArray, at: int) -> void:
	var n := mean.size()
	for i in range(n):
		mean[i] = values[at + i]
		scale[i] = 1.0 / sqrt(max(values[at + n + i], 0.0) + epsilon)
