extends "res://tests/fake_agent.gd"
# A fake agent that observes an image (a "camera" of 2 x 3 pixels x RGB, its bytes from its position and
# resets) beside its vector "obs", for the tests of the camera's encoders (test_camera_obs.gd).

const HEIGHT := 2
const WIDTH := 3


func get_obs():
	var frame := PoolByteArray()
	for i in range(HEIGHT * WIDTH * 3):
		frame.append((int(position) * 16 + resets + i) % 256)
	return {"obs": [position, float(resets)], "camera_2d": frame}


func get_obs_space() -> Dictionary:
	return {"obs": {"size": [2], "space": "box"}, "camera_2d": {"size": [HEIGHT, WIDTH, 3], "space": "box"}}
