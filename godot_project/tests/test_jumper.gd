extends "res://tests/test_case.gd"
# Jumper's arena: course layout, seeding, observations, falling and reaching the goal.

const Arena = preload("res://games/jumper/arena.tscn")

var arenas := []


func cleanup() -> void:
	for arena in arenas:
		arena.queue_free()


func _arena(seed_value: int, index: int):
	var arena = Arena.instance()
	arena.seed_value = seed_value
	arena.index = index
	# Each arena of the run in a place of its own (the previous test's arenas are freed only at the end of
	# the frame), near the origin (float32 physics loses precision kilometres away).
	var n: int = tree.get_meta("jumper_arenas") if tree.has_meta("jumper_arenas") else 0
	tree.set_meta("jumper_arenas", n + 1)
	arena.translation = Vector3(-300 - 100 * (n % 10), 0, -300 - 100 * (n / 10))
	tree.root.add_child(arena)
	arenas.append(arena)
	arena.controller.begin_episode()
	return arena


func test_courses_have_gaps_to_jump() -> void:
	var arena = _arena(1, 0)
	for _course in range(20):
		for k in range(1, arena.COURSE_PLATFORMS):
			var a: Vector3 = arena.top_centre(k - 1)
			var b: Vector3 = arena.top_centre(k)
			var along := Vector2(b.x - a.x, b.z - a.z)
			# The midpoint between the two platforms' facing edges is over the void.
			var edge_a := a + Vector3(along.x, 0, along.y).normalized() * (along.length() / 2.0)
			check(not arena.is_on(k - 1, edge_a) and not arena.is_on(k, edge_a), "a gap between %d and %d" % [k - 1, k])
			check(along.length() >= arena.SIZE_MIN + arena.GAP_MIN - 1e-3, "platforms %d and %d apart" % [k - 1, k])
			check(abs(b.y - a.y) <= max(abs(arena.RISE_MIN), arena.RISE_MAX) + 1e-3, "a rise a jump can take")
		arena.next_course()


func test_same_seed_same_course() -> void:
	var a = _arena(5, 3)
	var b = _arena(5, 3)
	var c = _arena(6, 3)
	check_eq(a.top_centre(3), b.top_centre(3), "goal with the same seed and index")
	check_eq(a.player.transform, b.player.transform, "agent start with the same seed and index")
	check(a.top_centre(3) != c.top_centre(3), "another seed gives another course")


func test_observation_is_normalised() -> void:
	var arena = _arena(1, 0)
	yield(physics_frames(3), "completed")
	var obs: Array = arena.controller.get_obs()
	check_eq(obs.size(), 26, "16 rays + goal + next platform + velocity + on floor")
	for value in obs:
		check(value >= -1.0 and value <= 1.0, "observation value %f outside [-1, 1]" % value)
	check_eq(obs[15] > 0.0, true, "the ray down sees the start platform")
	check_eq(obs[25], 1.0, "standing on the start platform")


func test_walking_off_the_edge_ends_the_episode() -> void:
	var arena = _arena(2, 0)
	var controller = arena.controller
	# Walk backwards (away from the course) until falling.
	controller.set_action({"move": [-1.0, 0.0], "jump": 0})
	for _i in range(240):
		yield(physics_frames(1), "completed")
		if controller.done:
			break
	check(controller.done, "falling off ends the episode")
	check(controller.reward < -0.5, "falling costs 1, less the shaping (got %f)" % controller.reward)
	check_eq(controller.get_info()["reached_goal"], 0, "no goal reached")


func test_reaching_the_goal_pays_and_brings_a_new_course() -> void:
	var arena = _arena(3, 0)
	var controller = arena.controller
	var goal_centre: Vector3 = arena.top_centre(3)
	var goal_node = arena.goal()
	# Put the agent just above the goal platform; it counts as reached once it lands.
	arena.player.translation = goal_centre + Vector3(0, 0.02, 0)
	controller.stage = 2
	controller.reward = 0.0
	for _i in range(10):  # it lands within a few frames
		yield(physics_frames(1), "completed")
		if controller.goals > 0:
			break
	check_eq(controller.goals, 1, "the goal is reached")
	check(controller.reward > controller.GOAL_REWARD - 0.01, "reaching it pays (got %f)" % controller.reward)
	check(not controller.done, "the episode goes on")
	check_eq(arena.platforms[0], goal_node, "the goal is the start of the new course")
	check(arena.top_centre(3) != goal_centre, "a new goal")
	check_eq(controller.get_info(), {"goals": 1, "reached_goal": 1}, "the info reports it")
