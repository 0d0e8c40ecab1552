extends Reference
# The dynamics of gymnasium's CartPole-v1 (classic_control/cartpole.py), line for line, in double
# precision (a GDScript float is a 64-bit double): the same constants, explicit Euler with tau 0.02,
# the same termination thresholds. A state is [x, x_dot, theta, theta_dot] (metres, m/s, radians
# from upright, rad/s). Static functions only, so a test can step it without a scene.

const GRAVITY := 9.8
const MASS_CART := 1.0
const MASS_POLE := 0.1
const TOTAL_MASS := MASS_POLE + MASS_CART
const LENGTH := 0.5  # half the pole's length
const POLE_MASS_LENGTH := MASS_POLE * LENGTH
const FORCE_MAG := 10.0
const TIME_STEP := 0.02  # gymnasium's tau, seconds between state updates (TAU is GDScript's 2 pi)
const THETA_THRESHOLD := 12 * 2 * PI / 360
const X_THRESHOLD := 2.4
# The initial state is uniform in [-RESET_BOUND, RESET_BOUND] for each of the four values.
const RESET_BOUND := 0.05


# The state after one step of 0.02 s with action 0 (push left) or 1 (push right). The expressions keep
# gymnasium's order of operations, so the results agree to the last bits.
static func step(state: Array, action: int) -> Array:
	var x: float = state[0]
	var x_dot: float = state[1]
	var theta: float = state[2]
	var theta_dot: float = state[3]
	var force := FORCE_MAG if action == 1 else -FORCE_MAG
	var costheta := cos(theta)
	var sintheta := sin(theta)
	var temp := (force + POLE_MASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS
	var thetaacc := (GRAVITY * sintheta - costheta * temp) / (
			LENGTH * (4.0 / 3.0 - MASS_POLE * (costheta * costheta) / TOTAL_MASS))
	var xacc := temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS
	x = x + TIME_STEP * x_dot
	x_dot = x_dot + TIME_STEP * xacc
	theta = theta + TIME_STEP * theta_dot
	theta_dot = theta_dot + TIME_STEP * thetaacc
	return [x, x_dot, theta, theta_dot]


static func is_terminal(state: Array) -> bool:
	var x: float = state[0]
	var theta: float = state[2]
	return x < -X_THRESHOLD or x > X_THRESHOLD or theta < -THETA_THRESHOLD or theta > THETA_THRESHOLD


static func random_state(rng: RandomNumberGenerator) -> Array:
	var state := []
	for _i in range(4):
		state.append(rng.randf_range(-RESET_BOUND, RESET_BOUND))
	return state


# gymnasium's observation space bounds: twice the termination thresholds; the velocities are
# unbounded (null in the observation space's "high" and "low").
static func observation_high() -> Array:
	return [X_THRESHOLD * 2, null, THETA_THRESHOLD * 2, null]
