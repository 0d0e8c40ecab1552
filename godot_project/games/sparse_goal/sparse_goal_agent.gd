extends "res://addons/rl_sync/agent_controller.gd"
# The RL interface of a SparseGoal agent; it also moves the agent's body and checks the goal.
#
# Reward: +1 for touching the goal, which ends the episode; nothing else, ever (no shaping, no wall
# penalty, no step cost), so an agent learns only once it has found the goal on its own. The time limit
# (max_episode_steps) ends the search otherwise.
# Observation (74 values in [-1, 1]): the agent's position in the room (x, y scaled to [-1, 1]), 8 wall
# rays (1 = touching, 0 = nothing within reach), and which cell of an 8 x 8 grid over the room it is in
# (one-hot, 64 values). The goal's position is not observed: it never moves, and finding it is the point.
# Why the grid: a curiosity bonus (RND) rates how new an observation looks to a small network, and a
# network generalises so smoothly over two coordinates that a place 100 px beyond the visited ones looks
# familiar; a cell never visited lights an input never seen, which looks new until it has been visited
# (as a grid-world's picture would). It also lets a policy learn place by place.
# Action: "move", discrete: 0 stay, 1 up, 2 down, 3 left, 4 right, at a fixed speed, sliding along walls.

const AGENT_RADIUS := 10.0
const SPEED := 1200.0
const GOAL_REWARD := 1.0
# The room is cut into GRID x GRID cells for the one-hot part of the observation.
const GRID := 8
const DIRECTIONS := [Vector2.ZERO, Vector2.UP, Vector2.DOWN, Vector2.LEFT, Vector2.RIGHT]

var velocity := Vector2.ZERO
# Episodes that ended at the goal, for the overlay and tests.
var goals_reached := 0

onready var room = get_parent().get_parent()
onready var body: KinematicBody2D = get_parent()
onready var sensor = $"../RaycastSensor"


func get_obs() -> Array:
	var obs := [body.position.x / room.SIZE * 2.0 - 1.0, body.position.y / room.SIZE * 2.0 - 1.0]
	obs += sensor.get_observation()
	var cells := []
	cells.resize(GRID * GRID)
	for i in range(cells.size()):
		cells[i] = 0.0
	var column := int(clamp(floor(body.position.x / room.SIZE * GRID), 0, GRID - 1))
	var row := int(clamp(floor(body.position.y / room.SIZE * GRID), 0, GRID - 1))
	cells[row * GRID + column] = 1.0
	return obs + cells


func get_action_space() -> Dictionary:
	return {"move": {"size": DIRECTIONS.size(), "action_type": "discrete"}}


func set_action(action: Dictionary) -> void:
	velocity = DIRECTIONS[int(action["move"])] * SPEED


func reset_episode() -> void:
	velocity = Vector2.ZERO
	body.position = room.start_position()


func get_heuristic_action() -> Dictionary:
	for pair in [[KEY_UP, KEY_W, 1], [KEY_DOWN, KEY_S, 2], [KEY_LEFT, KEY_A, 3], [KEY_RIGHT, KEY_D, 4]]:
		if Input.is_key_pressed(pair[0]) or Input.is_key_pressed(pair[1]):
			return {"move": pair[2]}
	return {"move": 0}


func _physics_process(_delta: float) -> void:
	if done:
		return
	# move_and_slide takes a velocity and applies the frame's delta itself; sliding keeps an agent that
	# pushes along a wall moving instead of stuck.
	body.move_and_slide(velocity)
	if body.position.distance_to(room.GOAL) < AGENT_RADIUS + room.GOAL_RADIUS:
		reward += GOAL_REWARD
		goals_reached += 1
		done = true
