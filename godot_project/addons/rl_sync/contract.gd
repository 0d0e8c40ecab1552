extends Reference
# GENERATED from python_trainer/base/contract.py (`python -m python_trainer.base.contract --write`): do not
# edit. The one declaration of what the game and the trainer share; tests/test_contract.py fails when this
# file is stale.

# The binary's flags (--name=value) and who reads them.
const FLAGS := {
	"port": "godot-rl",
	"env_seed": "godot-rl",
	"speedup": "godot-rl",
	"action_repeat": "godot-rl",
	"headless": "godot-rl",
	"env": "rl_sync",
	"list_envs": "rl_sync",
	"agents": "rl_sync",
	"copies": "rl_sync",
	"max_episode_steps": "rl_sync",
	"connect_timeout": "rl_sync",
	"token": "rl_sync",
	"env_param": "rl_sync",
	"max_fps": "rl_sync",
	"no_vsync": "rl_sync",
	"quit_after_frames": "rl_sync",
	"quit_after_seconds": "rl_sync",
	"policy": "rl_sync",
	"opponent": "rl_sync",
	"policy_reload": "rl_sync",
	"policy_sample": "rl_sync",
	"policy_noop_max": "rl_sync",
	"policy_forward": "rl_sync",
	"eval_episodes": "rl_sync",
	"benchmark_steps": "rl_sync",
	"record_dir": "rl_sync",
	"record_every": "rl_sync",
	"record_episodes": "rl_sync",
	"record_agent": "rl_sync",
	"record_demos": "rl_sync",
	"rl_sync_watched": "rl_sync",
	"fragment_part_floats": "tests",
	"cnn_bench_agents": "tests",
	"cnn_bench_decisions": "tests",
	"cnn_case": "tests",
	"cnn_policy": "tests",
	"lstm_bench_frames": "tests",
	"lstm_case": "tests",
	"probe_out": "tests",
	"probe_replay": "tests",
	"weights_bench": "tests",
	"weights_case": "tests",
}
# String.similarity from which an unknown flag is taken for a misspelling of one of FLAGS.
const SIMILAR_FLAG := 0.75
# The project setting where a game lists its own flags, never warned about.
const OWN_FLAGS_SETTING := "rl_sync/own_flags"
# The line said at start for such a flag ({given}: the argument as typed).
const WARNING := "rl_sync: warning: unknown flag {given}; did you mean --{known}?"

# What else both sides share: the wire, images, files, and the bounds of sizes (python_trainer/base/
# contract.py says what each one is; bounds.py the bounds).
const EDITOR_PORT := 11008
const CONNECT_TIMEOUT_S := 30.0
const MAJOR_VERSION := "0"
const MINOR_VERSION := "7"
const EXTENSION_VERSION := 1
const EXTENSION_KEY := "extension_version"
const ENV_INFO_KEYS := ["n_agents", "observation_space", "action_space"]
const POLICY_NAMES_KEY := "agent_policy_names"
const TEAMS_KEY := "agent_teams"
const ARENAS_KEY := "agent_arenas"
const SCRIPTED_KEY := "agent_scripted"
const DECISION_FRAMES_KEY := "decision_frames"
const PHYSICS_FPS_KEY := "physics_fps"
const ENV_INFO_EXTENSIONS := ["env", "max_episode_steps", "extension_version", "obs_encoding", "step_encoding", "env_params", "agents_from_flag", "copies", "agent_teams", "agent_arenas", "agent_scripted", "decision_frames", "physics_fps"]
const JSON_ENCODING := "json"
const PACKED_OBS_ENCODING := "f32_base64"
const BINARY_STEP_ENCODING := "binary"
const OBS_ENCODINGS := ["json", "f32_base64"]
const STEP_ENCODINGS := ["json", "binary"]
const POOL_BYTE_ARRAY := 20
const POOL_INT_ARRAY := 21
const POOL_REAL_ARRAY := 22
const PACKED_HEADER_BYTES := 8
const STATUS_RUNNING := 0
const STATUS_TERMINATED := 1
const STATUS_TRUNCATED := 2
const IMAGE_KEY_MARK := "2d"
const POLICY_FORMAT := "godot-ppo-policy"
const POLICY_VERSION := 5
const POLICY_VERSIONS := [1, 2, 3, 4, 5]
const POLICY_BUNDLE_VERSION := 3
const POLICY_CAMERA_VERSION := 4
const DEMO_FORMAT := "rl_sync_demo/1"
const ACTIVATIONS := ["linear", "relu", "tanh", "sigmoid"]
const MAX_POLICY_LAYERS := 32
const POLICY_BYTES_PER_WEIGHT := 16
const ADDON_LINE := "rl_sync: "
const ERROR_PREFIX := "rl_sync: error: "
const WARNING_PREFIX := "rl_sync: warning: "
const BENCHMARK_REPORT := "benchmark"
const EVAL_REPORT := "eval"
const ENVS_REPORT := "envs"
const ENVS_DEFAULT_KEY := "default"
const ENVS_PARAMS_KEY := "env_params"
const RUN_REPORT := "run"
const RELOAD_LINE := "rl_sync: policy reloaded (global step "
const WINDOW_LINE := "rl_sync: agents in the window: "
const PERSON_LINE := "rl_sync: you play: "
const ENGINE_SCRIPT_ERROR := "SCRIPT ERROR:"
const ENGINE_ERROR := "ERROR:"
const ENGINE_WARNING := "WARNING:"
const ENGINE_AT := "At:"
const MAX_MESSAGE_BYTES := 67108864
const MAX_CAMERA_SIDE := 512
const MAX_FRAME_STACK := 64
const MAX_LAYER_SIZE := 65536
const MAX_POLICY_WEIGHTS := 16777216
const MAX_AGENTS_PER_INSTANCE := 2048

# The message kinds: each one's "type" value (contract.py's MESSAGES says whose it is and its fields).
const TYPE_KEY := "type"
const MSG_HANDSHAKE := "handshake"
const MSG_ENV_INFO := "env_info"
const MSG_RESET := "reset"
const MSG_ACTION := "action"
const MSG_STEP := "step"
const MSG_CALL := "call"
const MSG_CLOSE := "close"
const MSG_HELLO := "hello"
const MSG_BUSY := "busy"
const MSG_ERROR := "error"
const MSG_STATS := "stats"
const MSG_ENV_PARAMS := "env_params"
const MSG_DRIVERS := "drivers"
const MSG_ACTORS := "actors"
const MSG_FRAGMENT := "fragment"
const MSG_ALIVE := "alive"
