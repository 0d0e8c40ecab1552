extends Reference
# godot-rl's `call` message: a trainer calls a method by name on every agent's controller and gets
# each agent's result, or null where its controller does not define the method. Our extension:
# arguments, the same for every agent ("args": [...]) or one list per agent ("agent_args": [[...],
# ...]); godot-rl sends neither.

const Wire = preload("res://addons/rl_sync/wire.gd")
const Result = preload("res://addons/rl_sync/result.gd")

var _agents: Array
# The methods a trainer may `call`: those the agents' controller scripts define, minus the engine's
# callbacks ("_..."). Calling anything else (queue_free, free...) would break the scene under the
# session and flood the log with a script error every frame. Each maps to [fewest, most] arguments,
# checked before the call: a wrong count would be a script error, not an answer.
var _callable := {}


func _init(agents: Array) -> void:
	_agents = agents
	for agent in agents:
		for method in agent.get_script().get_script_method_list():
			if not method["name"].begins_with("_"):
				var most: int = method["args"].size()
				_callable[method["name"]] = [most - method["default_args"].size(), most]


# Returns a Result: GO_ON with the results, or FAILED saying what is wrong with the arguments (checked
# for every agent before any is called).
func call_agents(method: String, message: Dictionary) -> Reference:
	var shared = message.get("args", [])
	var per_agent = message.get("agent_args")
	if typeof(shared) != TYPE_ARRAY:
		return Result.failed("call '%s': \"args\" must be a list of arguments, got %s" % [method, Wire.preview(shared)])
	if per_agent != null and (typeof(per_agent) != TYPE_ARRAY or per_agent.size() != _agents.size()):
		return Result.failed("call '%s': \"agent_args\" must hold one list of arguments per agent (%d), got %s"
				% [method, _agents.size(), Wire.preview(per_agent)])
	var arg_lists := []
	for i in range(_agents.size()):
		var args = shared if per_agent == null else per_agent[i]
		if typeof(args) != TYPE_ARRAY:
			return Result.failed("call '%s': the arguments of agent %d must be a list, got %s" % [method, i, Wire.preview(args)])
		if _callable.has(method) and _agents[i].has_method(method):
			var counts: Array = _callable[method]
			if args.size() < counts[0] or args.size() > counts[1]:
				return Result.failed("call '%s': it takes %s arguments, agent %d was given %d"
						% [method, str(counts[0]) if counts[0] == counts[1] else "%d to %d" % counts, i, args.size()])
		arg_lists.append(args)
	var returns := []
	for i in range(_agents.size()):
		var agent = _agents[i]
		returns.append(agent.callv(method, arg_lists[i]) if _callable.has(method) and agent.has_method(method) else null)
	return Result.go_on(returns)
