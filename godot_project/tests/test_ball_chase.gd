extends "res://tests/test_case.gd"
# BallChase's arena: observation layout, seeding and rewards.

const Arena = preload("res://games/ball_chase/arena.tscn")

var arenas := []


func cleanup() -> void:
	for arena in arenas:
		arena.queue_free()


func _arena(seed_value: int, index: int):
	var arena = Arena.instance()
	arena.seed_value = seed_value
	arena.index = index
	arena.position = Vector2(10000 + 1000 * arenas.size(), 0)
	tree.root.add_child(arena)
	arenas.append(arena)
	arena.controller.begin_episode()
	return arena


func test_observation_is_normalised() -> void:
	var arena = _arena(1, 0)
	yield(physics_frames(1), "completed")
	var obs: Array = arena.controller.get_obs()
	check_eq(obs.size(), 12, "8 rays + fruit vector + velocity")
	for value in obs:
		check(value >= -1.0 and value <= 1.0, "observation value %f outside [-1, 1]" % value)


func test_same_seed_same_episode_start() -> void:
	var a = _arena(5, 3)
	var b = _arena(5, 3)
	var c = _arena(6, 3)
	check_eq(a.player.position, b.player.position, "agent start with the same seed and index")
	check_eq(a.fruit_position, b.fruit_position, "fruit with the same seed and index")
	check(a.fruit_position != c.fruit_position, "another seed gives another fruit position")


func test_touching_a_wall_ends_the_episode_with_a_penalty() -> void:
	var arena = _arena(2, 0)
	arena.controller.set_action({"move": [1.0, 0.0]})
	var frames := 0
	while not arena.controller.done and frames < 200:
		yield(physics_frames(1), "completed")
		frames += 1
	check(arena.controller.done, "the agent reached the right wall within 200 frames")
	check(arena.controller.reward < -0.5, "the wall penalty is in the reward (got %f)" % arena.controller.reward)


func test_collecting_fruit_pays_and_respawns_it() -> void:
	var arena = _arena(3, 0)
	var fruit: Vector2 = arena.fruit_position
	var collected := false
	for _i in range(300):
		var direction: Vector2 = (arena.fruit_position - arena.player.position).normalized()
		arena.controller.set_action({"move": [direction.x, direction.y]})
		yield(physics_frames(1), "completed")
		if arena.fruit_position != fruit:
			collected = true
			break
	check(collected, "steering at the fruit collects it within 300 frames")
	check(arena.controller.reward > 1.0, "fruit reward plus shaping (got %f)" % arena.controller.reward)
	check(not arena.controller.done, "collecting is not an episode end")
