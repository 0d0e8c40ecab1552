extends "res://tests/test_case.gd"
# The unknown-flag warning (issue 59): a flag close to one of ours (contract.gd) gets one line naming the nearest,
# the game's own flags (rl_sync/own_flags) and flags unlike ours get none.

const RlArgs = preload("res://addons/rl_sync/rl_args.gd")


func test_a_misspelt_flag_of_ours_is_named_with_the_nearest() -> void:
	check_eq(RlArgs.unknown_flag_lines(["--agnets=4"], []),
			["rl_sync: warning: unknown flag --agnets=4; did you mean --agents?"], "two letters swapped")
	check_eq(RlArgs.unknown_flag_lines(["--env_sed=3", "--speedp=2", "--env-seed=1"], []), [
			"rl_sync: warning: unknown flag --env_sed=3; did you mean --env_seed?",
			"rl_sync: warning: unknown flag --speedp=2; did you mean --speedup?",
			"rl_sync: warning: unknown flag --env-seed=1; did you mean --env_seed?"], "a letter dropped or changed")
	check_eq(RlArgs.unknown_flag_lines(["--eval_episode"], []),
			["rl_sync: warning: unknown flag --eval_episode; did you mean --eval_episodes?"], "a bare flag")


func test_our_flags_the_games_own_and_unlike_flags_are_not_warned_about() -> void:
	check_eq(RlArgs.unknown_flag_lines(["--agents=4", "--port=1", "--headless", "-s", "x.gd", "--vision=0"], []), [],
			"ours, godot-rl's, the engine's and an unlike one")
	check_eq(RlArgs.unknown_flag_lines(["--agnets=4", "--speedp=2"], ["agnets", " speedp "]), [],
			"the game's own (rl_sync/own_flags), spaces around them")
