extends Reference
# The core the two ray sensors share (raycast_sensor_2d.gd, raycast_sensor_3d.gd): their rays set up,
# cast, and read as observation values. RayCast2D and RayCast have the same methods, so one code serves
# both.
#
# Each ray reads as [distance, one-hot of what it hit]: distance is 1 - distance / ray_length for the
# nearest hit, 0 when nothing is within reach (near things read as large values). The one-hot has one
# entry per class the sensor lists, its groups first (`hit_groups`: a class is the node the ray hit
# being in that group) then its layers (`hit_layers`: the hit node's collision_layer sharing a bit with
# that entry); the first class that matches is set, none for a hit that matches no class or no hit.
# With no classes listed a ray reads as its distance alone.


# A ray of the sensor's, disabled (it is cast only when an observation is asked for), pointing along
# `cast_to`, seeing what the sensor's settings say and never the body the sensor is on.
static func configure(ray: Node, cast_to, sensor: Node) -> void:
	ray.enabled = false
	ray.cast_to = cast_to
	ray.collision_mask = sensor.collision_mask
	ray.collide_with_areas = sensor.collide_with_areas
	ray.collide_with_bodies = sensor.collide_with_bodies
	var body := sensor.get_parent()
	if body is CollisionObject2D or body is CollisionObject:
		ray.add_exception(body)


# Number of classes of a sensor's one-hot.
static func n_classes(sensor: Node) -> int:
	return sensor.hit_groups.size() + sensor.hit_layers.size()


# The class of the node a ray hit: its index among the sensor's groups then layers, or -1.
static func class_of(collider: Object, groups: Array, layers: Array) -> int:
	if not collider is Node:
		return -1
	for i in range(groups.size()):
		if collider.is_in_group(groups[i]):
			return i
	if not layers.empty() and "collision_layer" in collider:
		for i in range(layers.size()):
			if collider.collision_layer & int(layers[i]):
				return groups.size() + i
	return -1


# Every ray cast now, and read as [distance, one-hot] one ray after the other.
static func read(rays: Array, ray_length: float, groups: Array, layers: Array) -> Array:
	var n := groups.size() + layers.size()
	var values := []
	for ray in rays:
		ray.force_raycast_update()
		if not ray.is_colliding():
			values.append(0.0)
			for _i in range(n):
				values.append(0.0)
			continue
		# Measured in the ray's own frame, so a scaled or rotated scene reads the same.
		values.append(1.0 - ray.to_local(ray.get_collision_point()).length() / ray_length)
		if n > 0:
			var hit := class_of(ray.get_collider(), groups, layers)
			for i in range(n):
				values.append(1.0 if i == hit else 0.0)
	return values


# [reach as a fraction of ray_length, class or -1] of ray i in values read by read(): for drawing.
static func reading(values: Array, i: int, n_classes: int) -> Array:
	var at := i * (1 + n_classes)
	var hit: bool = values[at] > 0.0
	var reach: float = 1.0 - values[at] if hit else 1.0
	var hit_class := -1
	for k in range(n_classes):
		if values[at + 1 + k] > 0.0:
			hit_class = k
	return [reach, hit_class if hit else -2]


# A ray's drawing colour: faint when it reaches nothing, red for a hit of no class, one hue a class.
static func colour(hit_class: int, n_classes: int, alpha: float) -> Color:
	if hit_class == -2:
		return Color(1, 1, 1, 0.12)
	if hit_class == -1:
		return Color(1, 0.4, 0.3, alpha)
	return Color.from_hsv(0.15 + 0.7 * hit_class / max(n_classes, 1), 0.8, 1.0, alpha)
