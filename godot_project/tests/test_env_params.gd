extends "res://tests/test_case.gd"
# Environment parameters (env_params.gd): declarations, checks, the trainer's message, and what each agent's
# episodes read, through a controller whose get_info() reports its parameter.

const EnvParams = preload("res://addons/rl_sync/env_params.gd")
const FakeAgent = preload("res://tests/fake_agent.gd")

const DECLARED := {"gap": {"default": 1.0, "min": 0.5, "max": 3.0}}

var nodes := []


func cleanup() -> void:
	for node in nodes:
		node.free()


# A node whose script declares `params` (a GDScript made at run time: get_env_params() returns them).
func _declaring(params: Dictionary) -> Node:
	var script := GDScript.new()
	script.source_code = "extends Node\nfunc get_env_params():\n\treturn %s\n" % to_json(params)
	script.reload()
	var node := Node.new()
	node.set_script(script)
	nodes.append(node)
	return node


# What `root` declares (a Result that goes on), or null after a failed check.
func _declared(root: Node):
	var read = EnvParams.declared_in(root)
	check(read.goes_on(), "the declarations are read: " + read.message)
	return read.value


# Why `root`'s declarations are refused ("" after a failed check: a declaration that was read).
func _refused(root: Node) -> String:
	var read = EnvParams.declared_in(root)
	check(read.is_failure() and read.value == null, "refused, with no value")
	return read.message


func test_declarations_are_merged_and_checked() -> void:
	var root := _declaring(DECLARED)
	root.add_child(_declaring({"gap": {"default": 1, "min": 0.5, "max": 3}, "size": {"default": 2, "min": 1, "max": 4}}))
	nodes.pop_back()  # freed with its parent
	check_eq(_declared(root), {"gap": {"default": 1.0, "min": 0.5, "max": 3.0}, "size": {"default": 2.0, "min": 1.0, "max": 4.0}},
			"both nodes' parameters, as floats")
	var other := _declaring(DECLARED)
	other.add_child(_declaring({"gap": {"default": 2.0, "min": 0.5, "max": 3.0}}))
	nodes.pop_back()
	check(_refused(other).find("declares 'gap'") != -1, "two declarations of 'gap' that differ")
	check(_refused(_declaring({"gap": {"default": 5.0, "min": 0.5, "max": 3.0}})).find(
			"outside its range") != -1, "a default out of its range")
	check(_refused(_declaring({"gap": {"default": 1.0}})).find("lacks a number \"min\"") != -1,
			"a declaration without a range")
	var text_node := _declaring({"gap": "1.0"})
	check(_refused(text_node).begins_with("%s: get_env_params()'s 'gap' must be {" % text_node.name),
			"a declaration that is text is refused, naming its node")


func test_values_are_checked_before_any_is_set() -> void:
	var params := EnvParams.new(DECLARED, 2, 0)
	check(params.check("gap", 2.0) == "", "a value in range")
	check(params.check("gap", 3.5).find("gap=3.5 is out of its range [0.5, 3]") != -1, params.check("gap", 3.5))
	check(params.check("gapx", 1.0).find("unknown environment parameter 'gapx': this game declares gap") != -1, "unknown")
	check(params.check("gap", "1").find("is not a number") != -1, "a String")
	check(params.check("gap", {"uniform": [0.4, 1.0]}).find("must lie within its range") != -1, "a sampler out of range")
	check(params.check("gap", {"gaussian": [1.0, -1.0]}).find("deviation >= 0") != -1, "a negative deviation")
	check(params.apply_message({"values": {"gap": 2.0, "other": 1.0}}) != "", "one bad name refuses the message")
	check_eq(params.settings(0), {}, "nothing set by a refused message")
	check(params.apply_message({"agent_values": [{"gap": 2.0}]}).find("one Dictionary per agent (2)") != -1, "agent count")
	check_eq(params.apply_message({"values": {"gap": 2.0}, "agent_values": [{}, {"gap": 0.5}]}), "", "a good message")
	check_eq([params.for_agent(0), params.for_agent(1)], [{"gap": 2.0}, {"gap": 0.5}], "shared and per-agent values")


# A parameter declared "fixed" is set by --env_param (set_values) only: a message may repeat its value.
func test_a_fixed_parameter_is_set_at_start_only() -> void:
	var fixed := {"vision": {"default": 1.0, "min": 0.0, "max": 1.0, "fixed": true}}
	check_eq(_declared(_declaring(fixed)), fixed, "kept in the declaration")
	check_eq(_declared(_declaring({"gap": {"default": 1.0, "min": 0.5, "max": 3.0, "fixed": false}})),
			DECLARED, "a false \"fixed\" is left out")
	check(_refused(_declaring({"v": {"default": 1, "min": 0, "max": 1, "fixed": 1}})).find(
			"not true or false") != -1, "a \"fixed\" that is not a bool")
	var params := EnvParams.new(fixed, 2, 0)
	check_eq(params.set_values({"vision": 0.0}), "", "the command line's value")
	check_eq(params.apply_message({"values": {"vision": 0.0}}), "", "the value in force, again")
	check(params.apply_message({"values": {"vision": 1.0}}).find("vision is fixed when the game starts") != -1,
			"another value")
	check(params.apply_message({"agent_values": [{}, {"vision": {"uniform": [0.0, 1.0]}}]}).find(
			"not by the trainer's message ({\"uniform\"") != -1, "a sampler for one agent")
	check_eq([params.for_agent(0), params.for_agent(1)], [{"vision": 0.0}, {"vision": 0.0}], "unchanged")


# The defaults draw nothing; a sampler draws a new value for every episode of every agent, read back through
# get_info() when each episode ends.
func test_a_sampler_varies_per_episode_and_defaults_draw_nothing() -> void:
	var params := EnvParams.new(DECLARED, 2, 7)
	var agents := []
	for i in range(2):
		var agent = FakeAgent.new()
		nodes.append(agent)
		agent.use_env_params(params, i)
		agent.begin_episode()
		agents.append(agent)
	check_eq(agents[0].env_param("gap"), 1.0, "the default")
	check(params._rngs[0] == null and params._rngs[1] == null, "no generator made for the defaults")
	check_eq(params.apply_message({"values": {"gap": {"uniform": [0.5, 3.0]}}}), "", "a uniform sampler")
	check_eq(agents[0].env_param("gap"), 1.0, "in force from the next episode only")
	var seen := {}
	for _episode in range(20):
		for agent in agents:
			agent.begin_episode()
			agent.info["gap"] = agent.env_param("gap")  # what a game's get_info() would report
			var value: float = agent.get_info()["gap"]
			check(value >= 0.5 and value <= 3.0, "a drawn value in [0.5, 3]: %f" % value)
			seen[value] = true
	check(seen.size() == 40, "40 episodes, 40 different values (got %d)" % seen.size())
	var again := EnvParams.new(DECLARED, 2, 7)
	again.set_values({"gap": {"uniform": [0.5, 3.0]}})
	var first: float = again.for_agent(0)["gap"]
	var replay := EnvParams.new(DECLARED, 2, 7)
	replay.set_values({"gap": {"uniform": [0.5, 3.0]}})
	check_eq(replay.for_agent(0)["gap"], first, "the same --env_seed draws the same values")
