extends Reference
# The in-engine actors' exchange (issue 58; `godot-ppo train --in-engine`), the game's side of its words:
# every message kind, field, status and period, declared once here. python_trainer/envs/fragment_wire.py
# declares the same in Python; a test holds the two equal. fragment_mode.gd speaks it.
#
#   trainer -> game  {"type": "actors", "path": FILE, "num_steps": T, "seed": S, "logprob": false}
#   game -> trainer  {"type": "actors", "weights": W, "obs_size": D, "action_size": A, "n_agents": N}
#   or, several policies: {"type": "actors", "paths": {NAME: FILE, ...}, "policies": [NAME, ...], ...}, whose
#   reply adds "sizes": {NAME: {"weights": W, "obs_size": D, "action_size": A}}: each agent's obs and action
#   values in the step blocks below are its own policy's D and A (agent order), the weights message the
#   policies' values one after the other in the "policies" order
#   trainer -> game  weights: one binary message, var2bytes(PoolRealArray) of W float32 values (no reply)
#   trainer -> game  {"type": "fragment", "version": k}
#   game -> trainer  {"type": "alive", "step": s} about every ALIVE_PERIOD_S of wall time while it collects,
#                    then {"type": "fragment", "version": k, "parts": P, "floats": F, "episodes": [{"agent": i,
#                    "return": R, "length": L, "info": {...}}, ...]} and P binary parts (var2bytes(PoolRealArray)
#                    each, at most the message limit), whose values joined are the fragment's body of F floats:
#   T step blocks: obs[N*D] (raw), actions[N*A] (as sampled: continuous values before clipping, then each
#   discrete key's index), rewards[N], statuses[N] (STATUS_*), the final obs [D] of each agent whose episode
#   ended (status not STATUS_RUNNING; agent order), and with "logprob" logprobs[N]; then the tail obs[N*D].

const Contract = preload("res://addons/rl_sync/contract.gd")

# Message kinds (the contract's), and the key of their kind.
const TYPE_KEY := Contract.TYPE_KEY
const ACTORS := Contract.MSG_ACTORS
const FRAGMENT := Contract.MSG_FRAGMENT
const ALIVE := Contract.MSG_ALIVE
const ERROR := Contract.MSG_ERROR

# "actors", the trainer's request.
const PATH_KEY := "path"
const NUM_STEPS_KEY := "num_steps"
const SEED_KEY := "seed"
const LOGPROB_KEY := "logprob"
# Several policies in one game (instead of PATH_KEY): {policy name: file}, and the names' order, which is the
# order of their values in a weights message and of their sizes in the reply.
const PATHS_KEY := "paths"
const POLICIES_KEY := "policies"
# With PATHS_KEY: per agent of the instance, the index in POLICIES_KEY of the file it samples, whatever its
# policy_name (--self-play: two teams of one policy name, each its route's network; POLICIES_KEY then names routes).
const AGENT_POLICIES_KEY := "agent_policies"
# "actors", the game's reply.
const WEIGHTS_KEY := "weights"
const OBS_SIZE_KEY := "obs_size"
const ACTION_SIZE_KEY := "action_size"
const N_AGENTS_KEY := "n_agents"
# With PATHS_KEY: {policy name: {WEIGHTS_KEY: W, OBS_SIZE_KEY: D, ACTION_SIZE_KEY: A}} (WEIGHTS_KEY above: their sum;
# OBS_SIZE_KEY and ACTION_SIZE_KEY above: the widest); each agent's step-block entries have its policy's sizes.
const SIZES_KEY := "sizes"
# "fragment", the request and the header.
const VERSION_KEY := "version"
const PARTS_KEY := "parts"
const FLOATS_KEY := "floats"
const EPISODES_KEY := "episodes"
# One ended episode of "episodes".
const AGENT_KEY := "agent"
const RETURN_KEY := "return"
const LENGTH_KEY := "length"
const INFO_KEY := "info"
# "alive".
const STEP_KEY := "step"
# An "error" message's text.
const MESSAGE_KEY := "message"

# An agent's status in a step block: the packed step reply's.
const STATUS_RUNNING := Contract.STATUS_RUNNING
const STATUS_TERMINATED := Contract.STATUS_TERMINATED
const STATUS_TRUNCATED := Contract.STATUS_TRUNCATED

# Seconds of wall time between two "alive" messages while a fragment is collected.
const ALIVE_PERIOD_S := 1.0

# env_info's "actors": the version of this exchange, raised whenever a message or the layout changes (the trainer
# refuses another with "re-export"; 4: AGENT_POLICIES_KEY, and a "drivers" message that keeps actor mode, the
# game's drivers acting in it).
const ACTORS_VERSION := 4
