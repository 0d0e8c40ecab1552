extends Spatial
# NearestNodes3D: the `count` nearest nodes of a group, nearest first (the 3D sibling of
# nearest_nodes_2d.gd), for any 3D game. A child of the agent's body.
#
# get_observation() returns 7 values per slot, count slots (observation_size()):
# [x, y, z, velocity x, y, z, present]: the node's position relative to this node divided by
# max_distance, its velocity divided by max_speed, and 1; slots past the nodes within max_distance
# are all 0. Both vectors are on the world's axes, or the agent's with rotate_with_agent. The
# velocity is the node's `linear_velocity` (a RigidBody) or `velocity` property when it has a Vector3
# one, else its displacement since the previous observation over the physics time between (0 for a
# node that observation did not see within max_distance). Call reset() in reset_episode() so that an
# episode's teleports do not read as speed. Only Spatials of this node's viewport are seen, never this
# node or the body it is on (group_nodes.gd, the core it shares with the grids and nearest_nodes_2d.gd).

const GroupNodes = preload("res://addons/rl_sync/group_nodes.gd")
const VALUES_PER_NODE := 7

export var group := ""
export var count := 4
# Nodes farther than this (in this node's frame) are not seen; positions are divided by it.
export var max_distance := 20.0
# Velocities are divided by it.
export var max_speed := 10.0
export var rotate_with_agent := false

var _frames := 0
var _seen_at_frame := -1
var _previous := {}  # instance id -> position in the previous observation (global)


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
	var values := []
	for entry in GroupNodes.nearest(self, group, to_frame, max_distance, count, false, positions):
		var velocity: Vector3 = GroupNodes.velocity_of(entry[1], _previous, elapsed, Vector3.ZERO, false)
		var p: Vector3 = entry[2] / max_distance
		var v := to_frame.basis.xform(velocity) / max_speed
		values += [p.x, p.y, p.z, v.x, v.y, v.z, 1.0]
	for _i in range(values.size(), observation_size()):
		values.append(0.0)
	_previous = positions
	_seen_at_frame = _frames
	return values


# The transform from global positions to this node's frame: turned with it or on the world's axes,
# scaled as it is (so a scaled scene reads the same).
func _to_frame() -> Transform:
	var frame := global_transform
	if not rotate_with_agent:
		frame = Transform(Basis().scaled(frame.basis.get_scale()), frame.origin)
	return frame.affine_inverse()
