tool
extends EditorPlugin
# Registers the addon's node types so they appear in the editor's "Create Node" dialog.


func _enter_tree() -> void:
	add_custom_type("RLSync", "Node", preload("sync.gd"), null)
	add_custom_type("RLAgentController", "Node", preload("agent_controller.gd"), null)
	add_custom_type("RaycastSensor2D", "Node2D", preload("raycast_sensor_2d.gd"), null)
	add_custom_type("RaycastSensor3D", "Spatial", preload("raycast_sensor_3d.gd"), null)
	add_custom_type("GridSensor2D", "Node2D", preload("grid_sensor_2d.gd"), null)
	add_custom_type("NearestNodes2D", "Node2D", preload("nearest_nodes_2d.gd"), null)
	add_custom_type("GridSensor3D", "Spatial", preload("grid_sensor_3d.gd"), null)
	add_custom_type("NearestNodes3D", "Spatial", preload("nearest_nodes_3d.gd"), null)
	add_custom_type("CameraSensor2D", "Node2D", preload("camera_sensor_2d.gd"), null)
	add_custom_type("CameraSensor3D", "Spatial", preload("camera_sensor_3d.gd"), null)


func _exit_tree() -> void:
	remove_custom_type("RLSync")
	remove_custom_type("RLAgentController")
	remove_custom_type("RaycastSensor2D")
	remove_custom_type("RaycastSensor3D")
	remove_custom_type("GridSensor2D")
	remove_custom_type("NearestNodes2D")
	remove_custom_type("GridSensor3D")
	remove_custom_type("NearestNodes3D")
	remove_custom_type("CameraSensor2D")
	remove_custom_type("CameraSensor3D")
