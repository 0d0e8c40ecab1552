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
