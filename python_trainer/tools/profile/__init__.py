"""`godot-ppo profile`: how much faster are headless instances than windowed ones, and what does each cost?

    godot-ppo profile --modes headless,windowed --num-instances 1,2,4,8 --agents-per-instance 16 --seconds 10
    godot-ppo profile --modes headless --num-instances 1,2 --steps 2000 --policy runs/ball_chase__ppo__1__1700000000
    godot-ppo profile ... --compare-training --compare-seconds 60
    godot-ppo profile --env forager --env-param vision=0 --copies 4 --modes headless --num-instances 1,2

(`--instances` and `--agents` are the older names of `--num-instances` and `--agents-per-instance`; `--copies` and
`--env-param` are train's: copies of the scene in each instance, the game's environment parameters. Given a run,
`--policy` also uses its `--env-param` (those given here win) and its frame stack.)

For every configuration (mode x instance count) the profiler starts the instances through the launcher (as
`vec_env.GodotVecEnv`, exactly what training uses), resets them, runs ``--warmup-steps`` steps, then measures a
fixed window (``--steps`` vector steps or ``--seconds`` of wall clock):

* throughput, the trainer's view: agent-steps/s and sync round trips/s (one round trip = send the actions to every
  instance, then read every reply); the game's own physics frames/s and, windowed, rendered frames/s, from the
  differences of the counters of the game's ``{"type": "stats"}`` reply at both ends of the window;
* headless only, where the time goes: the engine-only rate (as many headless processes at once running
  ``--benchmark_steps``: random actions chosen inside the engine, no trainer, the limit of the sync loop) before
  the launch, the synced rate's share of it, and with 2 or more instances the same window again pipelined as
  training runs it (``env.groups``: one half of the instances simulates while the other half's actions are chosen);
* what was drawn: nothing (headless), the whole window every frame, or, for a camera game (run with
  ``--disable-render-loop`` as training runs it), only the camera sensors' viewports;
* cost: a psutil thread reads every ``--sample-interval`` s the CPU times (user, system), resident memory and
  thread count of each instance, of this Python process, of the Xvfb the launcher started (if any) and of the whole
  machine. CPU % is in "percent of one core" (0..100 x cores); "other" is the machine's CPU use that is none of
  ours (other users' jobs: a large value means the measurement was contaminated).

Outputs in ``--out`` (default ``runs/profile_<time>/``, rewritten after every configuration so Ctrl-C keeps what
was measured): profile.json (machine, every sample, every summary), profile.csv (one row per configuration),
profile.md (the table printed at the end, with the verdict), profile.png. Instance logs go to
``instances/<mode>_x<n>/logs/``. An instance that crashes marks its configuration "failed" (with the log tail) and
the profile goes on.

``--compare-training`` then trains PPO (`godot-ppo train`, a child process stopped with SIGINT, which it handles by
checkpointing) for the same wall-clock budget on the fastest headless and the fastest windowed configuration and
reports the episodic return reached and its gain per wall-clock minute.

The verdict is computed from the table's figures: the best configuration of each mode, and scaling that "stops
growing beyond N" only when no larger instance count measured beats N's rate by 10% or more.

The modules, one job each: command (the flags and the run over the configurations), sample (the machine, the psutil
sampler), measure (the engine-only rate, one configuration), report (the verdict, the table, the files), compare
(the training comparison).
"""
