extends Node2D
# NearestNodes2D: the `count` nearest nodes of a group, nearest first (as ML-Agents' BufferSensor
# fed with the closest objects), for any 2D game. A child of the agent's body.
#
# get_observation() returns 5 values per slot, count slots (observation_size()):
# [x, y, velocity x, velocity y, present]: the node's position relative to this node divided by
# max_distance, its velocity divided by max_speed, and 1; slots past the nodes within max_distance
# are all 0. Both vectors are on the world's axes, or the agent's with rotate_with_agent. The
# velocity is the node's `linear_velocity` (a RigidBody2D) or `velocity` property when it has a
# Vector2 one, else its displacement since the previous observation over the physics time between
# (0 for a node that observation did not see within max_distance). Call reset() in reset_episode()
# so that an episode's teleports do not read as speed. Only Node2Ds of this node's viewport are seen (each copy of
# --copies has its own), never this node or the body it is on; looked up only when observed
# (group_nodes.gd, the core it shares with the grids and nearest_nodes_3d.gd).

const GroupNodes = preload("res://addons/rl_sync/group_nodes.gd")
const VALUES_PER_NODE := 5

export var group := ""
export var count := 4
# Nodes farther than this (in this node's frame) are not seen; positions are divided by it.
export var max_distance := 1000.0
# Velocities are divided by it.
export var max_speed := 500.0
export var rotate_with_agent := false
# Draws a line to each node seen in windowed runs; costs nothing headless.
export var debug_draw := true

var _frames := 0
var _seen_at_frame := -1
var _previous := {}  # instance id -> position in the previous observation (global)
var _last_seen := []


func _ready() -> void:
	# Drawing is only worth it where something is rendered.
	debug_draw = debug_draw and OS.get_name() != "Server"


func _physics_process(_delta: float) -> void:
	_frames += 1


func observation_size() -> int:
	return count * VALUES_PER_NODE


# Forget the positions seen so far: the next observation reads the nodes without a velocity of their own as still.
func reset() -> void:
	_previous.clear()
	_seen_at_frame = -1


func get_observation() -> Array:
	var to_frame := _to_frame()
	var elapsed := float(_frames - _seen_at_frame) / Engine.iterations_per_second if _seen_at_frame >= 0 else 0.0
	var positions := {}
	var nearest := GroupNodes.nearest(self, group, to_frame, max_distance, count, true, positions)
	var values := []
	for entry in nearest:
		var velocity: Vector2 = GroupNodes.velocity_of(entry[1], _previous, elapsed, Vector2.ZERO, true)
		var v := to_frame.basis_xform(velocity)
		values += [entry[2].x / max_distance, entry[2].y / max_distance, v.x / max_speed, v.y / max_speed, 1.0]
	for _i in range(values.size(), observation_size()):
		values.append(0.0)
	_previous = positions
	_seen_at_frame = _frames
	if debug_draw:
		_last_seen = []
		for entry in nearest:
			_last_seen.append(entry[1].global_position)
		update()
	return values


# The transform from global positions to this node's frame: turned with it or on the world's axes,
# scaled as it is (so a scaled scene reads the same).
func _to_frame() -> Transform2D:
	var frame := global_transform
	if not rotate_with_agent:
		var scale := frame.get_scale()
		frame = Transform2D(Vector2(scale.x, 0), Vector2(0, scale.y), frame.origin)
	return frame.affine_inverse()


func _draw() -> void:
	var to_local := global_transform.affine_inverse()
	for position in _last_seen:
		draw_line(Vector2.ZERO, to_local.xform(position), Color(0.3, 1.0, 0.5, 0.5), 1.0)
