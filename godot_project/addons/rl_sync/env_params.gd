extends Reference
# Environment parameters: numbers a game declares (a difficulty, a size), which a trainer or the
# command line sets and each agent reads when its episode begins.
#
# A game declares them with get_env_params() -> {"gap_max": {"default": 2.2, "min": 0.5, "max": 4.0}}
# on any node of its scene (its root script, or its agents' controllers); it must return the same
# constant Dictionary every time, since --list_envs asks a scene that was only instanced, never run.
# A controller reads the value in force with env_param("gap_max") (agent_controller.gd) in its
# reset_episode(). What sets values:
#   --env_param=NAME=VALUE      on the binary (repeatable): a constant for every agent, from the start
#   {"type": "env_params", ...} the trainer's message (trainer_session.gd): "values" for every agent,
#                               "agent_values" one Dictionary per agent; a value is a number or a
#                               sampler, {"uniform": [lo, hi]} or {"gaussian": [mean, std]}
# Both take effect at each agent's next episode. A parameter declared with "fixed": true is read once,
# when each agent starts (it shapes what the agents observe, as forager's vision does): only
# --env_param sets it; a message may repeat the value in force, never change it or give a sampler.
# A sampler draws a new value for every episode from a
# generator of its own (seeded by --env_seed and the agent's index); constants and defaults draw
# nothing, so a game run with its defaults is the same, bit for bit, as one without parameters.
# Nothing here quits or prints: a check returns "" or what is wrong; what gives a value or an error
# gives a Result (result.gd).

const Result = preload("res://addons/rl_sync/result.gd")

# The flag on the binary, repeatable (--env_param=gap_max=3.0 --env_param=gap_min=2.6).
const FLAG := "env_param"
const SAMPLERS := ["uniform", "gaussian"]

# Name -> {"default", "min", "max"} (floats), merged from every node that declares.
var declared := {}
# Per agent: name -> a float or a sampler Dictionary; only what was set (the defaults are not copied).
var _settings := []
# Per agent: the generator of its samplers, made on first use (null: nothing sampled yet).
var _rngs := []
var _seed := 0


func _init(declared_params: Dictionary, n_agents: int, seed_value: int) -> void:
	declared = declared_params
	_seed = seed_value
	for _i in range(n_agents):
		_settings.append({})
		_rngs.append(null)


# The parameters declared by `root` and the nodes under it: a Result, GO_ON with a Dictionary, or FAILED
# saying which declaration is wrong (a node that declares differently from another, a default out of its range).
static func declared_in(root: Node) -> Reference:
	var found := {}
	var nodes := [root]
	while not nodes.empty():
		var node: Node = nodes.pop_back()
		nodes += node.get_children()
		if not node.has_method("get_env_params"):
			continue
		var params = node.get_env_params()
		if typeof(params) != TYPE_DICTIONARY:
			return Result.failed("%s: get_env_params() must return a Dictionary of name -> {\"default\", \"min\", \"max\"}"
					% node.name)
		for name in params:
			var read: Result = _declaration(params[name])
			if read.is_failure():
				return Result.failed("%s: get_env_params()'s '%s' %s" % [node.name, str(name), read.message])
			var spec: Dictionary = read.value
			if found.has(name) and not _same(found[name], spec):
				return Result.failed("%s: get_env_params() declares '%s' as %s, another node as %s"
						% [node.name, name, to_json(spec), to_json(found[name])])
			found[name] = spec
	return Result.go_on(found)


# One parameter's declaration as {"default", "min", "max"[, "fixed"]}: a Result, FAILED with what
# the declaration lacks (the caller names the node and the parameter).
static func _declaration(entry) -> Reference:
	if typeof(entry) != TYPE_DICTIONARY:
		return Result.failed("must be {\"default\": D, \"min\": LO, \"max\": HI}")
	var spec := {}
	for key in ["default", "min", "max"]:
		if not typeof(entry.get(key)) in [TYPE_INT, TYPE_REAL]:
			return Result.failed("lacks a number \"%s\" (give {\"default\": D, \"min\": LO, \"max\": HI})" % key)
		spec[key] = float(entry[key])
	if entry.has("fixed"):  # only a true "fixed" is kept: other declarations read as they always did
		if typeof(entry["fixed"]) != TYPE_BOOL:
			return Result.failed("has a \"fixed\" that is not true or false")
		if entry["fixed"]:
			spec["fixed"] = true
	if not (spec["min"] <= spec["default"] and spec["default"] <= spec["max"]):
		return Result.failed("has a default %s outside its range [%s, %s]" % [spec["default"], spec["min"], spec["max"]])
	return Result.go_on(spec)


static func _same(a: Dictionary, b: Dictionary) -> bool:
	return a["default"] == b["default"] and a["min"] == b["min"] and a["max"] == b["max"] \
			and a.get("fixed", false) == b.get("fixed", false)


# "" when `value` (a number, or a sampler Dictionary) may be given to `name`, else why not.
func check(name, value) -> String:
	if typeof(name) != TYPE_STRING or not declared.has(name):
		return "unknown environment parameter '%s': this game declares %s" % [str(name), names_text()]
	var spec: Dictionary = declared[name]
	var bounds := "[%s, %s]" % [spec["min"], spec["max"]]
	if typeof(value) in [TYPE_INT, TYPE_REAL]:
		if is_nan(float(value)) or float(value) < spec["min"] or float(value) > spec["max"]:
			return "environment parameter %s=%s is out of its range %s" % [name, str(value), bounds]
		return ""
	if typeof(value) == TYPE_DICTIONARY and value.size() == 1 and value.keys()[0] in SAMPLERS:
		var kind: String = value.keys()[0]
		var args = value[kind]
		if typeof(args) != TYPE_ARRAY or args.size() != 2 or not typeof(args[0]) in [TYPE_INT, TYPE_REAL] \
				or not typeof(args[1]) in [TYPE_INT, TYPE_REAL]:
			return "environment parameter %s: a %s sampler takes two numbers, got %s" % [name, kind, to_json(args)]
		if kind == "uniform" and (args[0] > args[1] or args[0] < spec["min"] or args[1] > spec["max"]):
			return "environment parameter %s=uniform(%s, %s) must lie within its range %s, low <= high" \
					% [name, args[0], args[1], bounds]
		if kind == "gaussian" and (args[1] < 0 or args[0] < spec["min"] or args[0] > spec["max"]):
			return "environment parameter %s=gaussian(%s, %s): the mean must lie within %s, the deviation >= 0" \
					% [name, args[0], args[1], bounds]
		return ""
	return "environment parameter %s: %s is not a number (nor {\"uniform\": [lo, hi]} / {\"gaussian\": [mean, std]})" \
			% [name, to_json(value) if typeof(value) in [TYPE_ARRAY, TYPE_DICTIONARY] else "'%s'" % str(value)]


func names_text() -> String:
	if declared.empty():
		return "no parameters"
	var names: Array = declared.keys()
	names.sort()
	return PoolStringArray(names).join(", ")


# Sets `values` (name -> number or sampler) for agent `agent`, or for every agent when it is -1;
# every value is checked before any is set. Returns "" or what is wrong. `message`: the trainer's
# message, which may not change a fixed parameter.
func set_values(values: Dictionary, agent: int = -1, message := false) -> String:
	for name in values:
		var error := check(name, values[name])
		if error == "" and message:
			error = _fixed_error(name, values[name], agent)
		if error != "":
			return error
	for i in range(_settings.size()):
		if agent == -1 or agent == i:
			for name in values:
				_settings[i][name] = values[name]
	return ""


# "" unless `name` is fixed and `value` is a sampler or another number than agent `agent`'s (-1: every
# agent's) value in force: a fixed parameter was read when the agents started.
func _fixed_error(name: String, value, agent: int) -> String:
	if not declared[name].get("fixed", false):
		return ""
	for i in range(_settings.size()):
		var now = _settings[i].get(name, declared[name]["default"])
		if (agent == -1 or agent == i) and not (typeof(value) in [TYPE_INT, TYPE_REAL] and float(value) == now):
			return "environment parameter %s is fixed when the game starts (it shapes what the agents observe), at %s: " \
					% [name, str(now)] + "set it with --env_param=%s=VALUE, not by the trainer's message (%s)" \
					% [name, to_json(value) if typeof(value) == TYPE_DICTIONARY else str(value)]
	return ""


# The trainer's {"type": "env_params", "values": {...}, "agent_values": [{...}, ...]}: "" or what is wrong.
func apply_message(message: Dictionary) -> String:
	var shared = message.get("values", {})
	var per_agent = message.get("agent_values")
	if typeof(shared) != TYPE_DICTIONARY:
		return "env_params: \"values\" must map parameter names to values, got %s" % to_json(shared)
	if per_agent != null and (typeof(per_agent) != TYPE_ARRAY or per_agent.size() != _settings.size()):
		return "env_params: \"agent_values\" must hold one Dictionary per agent (%d)" % _settings.size()
	var error := set_values(shared, -1, true)
	if error == "" and per_agent != null:
		for i in range(per_agent.size()):
			if typeof(per_agent[i]) != TYPE_DICTIONARY:
				return "env_params: the values of agent %d must be a Dictionary, got %s" % [i, to_json(per_agent[i])]
			error = set_values(per_agent[i], i, true)
			if error != "":
				break
	return error


# --env_param=NAME=VALUE flags (repeatable, so read from the raw command line): "" or what is wrong.
func apply_flags() -> String:
	var values := {}
	for arg in OS.get_cmdline_args():
		if not arg.begins_with("--" + FLAG + "="):
			continue
		var body: String = arg.substr(FLAG.length() + 3, arg.length())
		var eq := body.find("=")
		var text := body.substr(eq + 1, body.length()) if eq > 0 else ""
		if eq <= 0 or not text.is_valid_float():
			return "--%s=%s is not valid: give --%s=NAME=NUMBER, NAME one of %s" % [FLAG, body, FLAG, names_text()]
		values[body.substr(0, eq)] = float(text)
	return set_values(values)


# What was set for agent `i` (for reports; the defaults are left out).
func settings(i: int) -> Dictionary:
	return _settings[i].duplicate()


# The values in force for agent `i`'s next episode: every declared parameter, its default unless set;
# a sampler draws its value now (the only draws, from the agent's own generator).
func for_agent(i: int) -> Dictionary:
	var values := {}
	for name in declared:
		values[name] = declared[name]["default"]
	var given: Dictionary = _settings[i]
	for name in given:
		var value = given[name]
		if typeof(value) != TYPE_DICTIONARY:
			values[name] = float(value)
			continue
		if _rngs[i] == null:
			_rngs[i] = RandomNumberGenerator.new()
			_rngs[i].seed = hash("env_params:%d:%d" % [_seed, i])
		var spec: Dictionary = declared[name]
		if value.has("uniform"):
			values[name] = _rngs[i].randf_range(value["uniform"][0], value["uniform"][1])
		else:
			values[name] = clamp(_rngs[i].randfn(value["gaussian"][0], value["gaussian"][1]), spec["min"], spec["max"])
	return values
