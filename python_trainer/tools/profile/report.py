"""What a profile says: the verdict, the per-configuration table, and the files it is written to (profile.json,
profile.csv, profile.md, profile.png), each replaced atomically."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Optional

from python_trainer.base.files import atomic_output, write_error
from python_trainer.tools.profile import camera
from python_trainer.tools.profile.measure import DRAWN_CAMERAS, DRAWN_WINDOW, MODES

SCALING_GAIN = 0.10  # "throughput stops growing": no larger instance count adds this fraction or more
CPU_BOUND_FRACTION = 0.85  # the machine is CPU-bound when this much of all cores is busy


# ======================================================================================================================
# Verdict
# ======================================================================================================================
def _ok(results, mode=None):
    return [r for r in results if r["status"] == "ok" and (mode is None or r["mode"] == mode)]


def best_config(results, mode):
    """The measured configuration of ``mode`` with the most agent-steps/s, or None."""
    ok = _ok(results, mode)
    return max(ok, key=lambda r: r["agent_steps_per_second"]) if ok else None


def scaling_stop(results, mode) -> Optional[tuple[dict, dict]]:
    """(config a, config b): a is the fewest instances that no larger count beats by SCALING_GAIN or more, b the best
    of the larger counts (the table's figures, so the verdict cannot contradict its table); None when that is the
    largest count measured (throughput still grows)."""
    ok = sorted(_ok(results, mode), key=lambda r: r["instances"])
    for i, a in enumerate(ok[:-1]):
        b = max(ok[i + 1:], key=lambda r: r["agent_steps_per_second"])
        if b["agent_steps_per_second"] < (1 + SCALING_GAIN) * a["agent_steps_per_second"]:
            return a, b
    return None


def _plural(n, word):
    return f"{n} {word}" + ("" if n == 1 else "s")


def verdict(results, cores) -> str:
    """One line: the best rate of each mode, headless against windowed, where scaling stops and why, what failed."""
    parts = []
    best = {m: best_config(results, m) for m in MODES}
    for m in MODES:
        if best[m]:
            parts.append(f"{best[m]['instances']} {m}: {best[m]['agent_steps_per_second']:,.0f} agent-steps/s")
    if best["headless"] and best["windowed"]:
        ratio = best["headless"]["agent_steps_per_second"] / best["windowed"]["agent_steps_per_second"]
        parts.append(f"headless is {ratio:.1f}x faster on this {cores}-core machine")
    elif parts:
        parts[-1] += f" on this {cores}-core machine"
    for m in MODES:
        ok = _ok(results, m)
        if len(ok) < 2:
            continue
        stop = scaling_stop(results, m)
        if stop is None:
            parts.append(f"{m} throughput still grows up to {_plural(max(r['instances'] for r in ok), 'instance')}")
            continue
        a, b = stop
        gain = 100.0 * (b["agent_steps_per_second"] / a["agent_steps_per_second"] - 1)
        busy = a["resources"].get("machine_cpu_pct", 0.0)
        bound = (f"CPU-bound: {busy:.0f}% of {100 * cores}% busy with {a['instances']}"
                 if busy >= CPU_BOUND_FRACTION * 100 * cores
                 else f"not CPU-bound: {busy:.0f}% of {100 * cores}% busy with {a['instances']}")
        parts.append(f"beyond {_plural(a['instances'], m + ' instance')} ({a['agent_steps_per_second']:,.0f}) "
                     f"throughput stops growing (at best {gain:+.0f}%, {b['agent_steps_per_second']:,.0f} with "
                     f"{b['instances']}; {bound})")
    failed = [r["key"] for r in results if r["status"] == "failed"]
    if failed:
        parts.append(f"failed: {', '.join(failed)}")
    return ("Verdict: " + "; ".join(parts)) if parts else "Verdict: no configuration could be measured"


def contamination_note(results, cores) -> Optional[str]:
    """A warning when other processes used a noticeable share of the CPU while we measured."""
    worst = max(((r["resources"].get("other_cpu_pct", 0.0), r["key"]) for r in _ok(results)), default=None)
    if worst is None or worst[0] < 25.0:
        return None
    return (f"Warning: other processes used up to {worst[0]:.0f}% CPU (of {100 * cores}%) during the measurements "
            f"({worst[1]}): the numbers are contaminated; re-run when `uptime` shows a low load.")


# ======================================================================================================================
# The table and the files
# ======================================================================================================================
def fmt_value(value, fmt="{:,.0f}", missing="-"):
    return missing if value is None or (isinstance(value, float) and math.isnan(value)) else fmt.format(value)


def table_row(r: dict) -> dict:
    """The flat per-configuration row shared by the CSV and the markdown table."""
    res = r.get("resources") or {}
    inst, py, xv = res.get("instance") or {}, res.get("python") or {}, res.get("xvfb") or {}
    n = max(1, inst.get("count", r["instances"]))
    return {
        "mode": r["mode"], "instances": r["instances"], "agents_per_instance": r["agents"], "status": r["status"],
        "copies_per_instance": r.get("copies", 1), "drawn": r.get("drawn"),
        "agent_steps_per_s": r.get("agent_steps_per_second"),
        "engine_only_agent_steps_per_s": r.get("engine_only_agent_steps_per_second"),
        "synced_share_of_engine_only": (r["agent_steps_per_second"] / r["engine_only_agent_steps_per_second"]
                                        if r.get("agent_steps_per_second") and r.get("engine_only_agent_steps_per_second")
                                        else None),
        "pipelined_agent_steps_per_s": r.get("pipelined_agent_steps_per_second"),
        "round_trips_per_s": r.get("round_trips_per_second"),
        "physics_fps_per_instance": r.get("physics_fps_per_instance"),
        "rendered_fps_per_instance": r.get("rendered_fps_per_instance"),
        "cpu_user_pct_per_instance": inst["cpu_user_pct"] / n if inst else None,
        "cpu_system_pct_per_instance": inst["cpu_system_pct"] / n if inst else None,
        "cpu_pct_all_instances": inst["cpu_user_pct"] + inst["cpu_system_pct"] if inst else None,
        "rss_mb_per_instance": inst.get("rss_mb_per_process"),
        "threads_per_instance": inst.get("threads_per_process"),
        "python_cpu_pct": py["cpu_user_pct"] + py["cpu_system_pct"] if py else None,
        "xvfb_cpu_pct": xv["cpu_user_pct"] + xv["cpu_system_pct"] if xv else None,
        "machine_cpu_pct": res.get("machine_cpu_pct"),
        "other_cpu_pct": res.get("other_cpu_pct"),
        "cores": res.get("cores"),
        "seconds": r.get("seconds"),
        "steps": r.get("steps"),
        "launch_seconds": r.get("launch_seconds"),
        "error": (r.get("error") or "").splitlines()[0][:200] if r.get("error") else "",
    }


MD_COLUMNS = [
    ("mode", "mode", "{}"), ("instances", "inst", "{}"), ("agents_per_instance", "agents/inst", "{}"),
    ("status", "status", "{}"), ("copies_per_instance", "copies/inst", "{}"), ("drawn", "drawn", "{}"),
    ("engine_only_agent_steps_per_s", "engine-only agent-steps/s", "{:,.0f}"),
    ("agent_steps_per_s", "synced agent-steps/s", "{:,.0f}"), ("synced_share_of_engine_only", "synced/engine", "{:.0%}"),
    ("pipelined_agent_steps_per_s", "pipelined agent-steps/s", "{:,.0f}"), ("round_trips_per_s", "round trips/s", "{:,.1f}"),
    ("physics_fps_per_instance", "physics fps/inst", "{:,.1f}"), ("rendered_fps_per_instance", "rendered fps/inst", "{:,.1f}"),
    ("cpu_user_pct_per_instance", "CPU% user/inst", "{:.0f}"), ("cpu_system_pct_per_instance", "CPU% sys/inst", "{:.0f}"),
    ("cpu_pct_all_instances", "CPU% all inst", "{:.0f}"), ("rss_mb_per_instance", "RSS MB/inst", "{:.0f}"),
    ("threads_per_instance", "threads/inst", "{:.0f}"), ("python_cpu_pct", "Python CPU%", "{:.0f}"),
    ("xvfb_cpu_pct", "Xvfb CPU%", "{:.0f}"), ("machine_cpu_pct", "machine CPU%", "{:.0f}"),
    ("other_cpu_pct", "other CPU%", "{:.0f}"),
]


def markdown(report: dict) -> str:
    """profile.md: the machine, the window, the table, the verdict, the failures and the training comparison."""
    m = report["machine"]
    cores = m["cores_logical"]
    lines = [
        f"# Headless vs windowed profile: {report['env']}",
        "",
        f"Machine: {m['cpu_model']}, {cores} logical cores, {m['memory_total_mb']:,} MB RAM; "
        f"load average at start {', '.join(map(str, m['load_average_at_start']))}; "
        f"engine {m.get('engine_version') or '?'}"
        + (f"; windowed renderer {m['renderer']}" if m.get("renderer") else "")
        + f"; Python {m['python']}, torch {m['torch']}.",
        f"Window: {report['window']}; warm-up {report['warmup_steps']} steps; policy {report['policy']}; "
        f"CPU % is percent of one core (max {100 * cores}%); 'other' = machine CPU not used by us.",
    ]
    if report.get("env_params"):
        lines.append("Environment parameters: " + ", ".join(f"{n}={v}" for n, v in report["env_params"].items()) + ".")
    if report.get("display_note"):
        lines.append(report["display_note"])
    shown = {r.get("drawn") for r in report["results"]}
    if shown & {DRAWN_WINDOW, DRAWN_CAMERAS}:
        lines.append("drawn: what a windowed instance renders: 'window', the whole game window every frame; 'cameras "
                     "only', the camera sensors' viewports on decision frames, the window never drawn "
                     "(--disable-render-loop, as training runs a camera game).")
    if report.get("copies", 1) != 1:
        lines.append(f"--copies {report['copies']}: each instance runs {report['copies']} copies of the game's scene; "
                     "agents/inst counts the agents of all of them.")
    if any(r.get("measured", "").startswith("from outside") for r in report.get("results", [])):
        lines.append("A game made with godot_rl_agents' plugin: measured from outside (it has no stats message nor "
                     "--benchmark_steps): physics fps = round trips x action repeat; no engine-only or rendered rate.")
    if any(r.get("engine_only_agent_steps_per_second") for r in report["results"]):
        lines.append("Engine-only: as many headless processes at once running `--benchmark_steps` (random actions "
                     "chosen in the engine, no trainer): the limit of the synced rate. Synced: the same window through "
                     "the vector env in strict turns (every game waits while Python chooses). Pipelined: as training "
                     "runs 2 or more instances (one half simulates while the other's actions are chosen).")
    lines += ["", "| " + " | ".join(h for _, h, _ in MD_COLUMNS) + " |", "|" + "---|" * len(MD_COLUMNS)]
    for r in report["results"]:
        row = table_row(r)
        lines.append("| " + " | ".join(fmt_value(row[k], f) for k, _, f in MD_COLUMNS) + " |")
    lines += ["", report["verdict"]]
    note = contamination_note(report["results"], cores)
    if note:
        lines += ["", note]
    failures = [r for r in report["results"] if r["status"] == "failed"]
    if failures:
        lines += ["", "## Failed configurations"]
        for r in failures:
            lines += ["", f"### {r['key']}", "", "```", r.get("error", "").rstrip()]
            if r.get("log_tail") and "last lines" not in r.get("error", ""):  # else the error quotes it already
                lines += [r["log_tail"].rstrip()]
            lines += ["```", f"logs: {r['log_dir']}"]
    training = report.get("training")
    if training:
        lines += ["", "## Training comparison (PPO, same wall-clock budget)", "",
                  "| config | status | wall s | agent-steps | steps/s | episodes | first return | final return | "
                  "return gain/min |", "|---|---|---|---|---|---|---|---|---|"]
        for t in training:
            lines.append(
                f"| {t['key']} | {t['status']} | {fmt_value(t.get('wall_seconds'), '{:.0f}')} | "
                f"{fmt_value(t.get('global_steps'))} | {fmt_value(t.get('steps_per_second'))} | {fmt_value(t.get('episodes'))} | "
                f"{fmt_value(t.get('first_return'), '{:.2f}')} | {fmt_value(t.get('final_return'), '{:.2f}')} | "
                f"{fmt_value(t.get('return_gain_per_minute'), '{:+.2f}')} |"
            )
        lines += ["", "first/final return: mean episodic return of the first/last 10% of the episodes "
                      "(at least 5); gain/min = (final - first) / wall-clock minutes."]
        if report.get("training_verdict"):
            lines += ["", report["training_verdict"]]
    if report.get("interrupted"):
        lines += ["", "**Interrupted (Ctrl-C): only the configurations above were measured.**"]
    return "\n".join(lines) + "\n"


def write_csv(path: Path, results) -> None:
    """profile.csv: one table row per configuration."""
    rows = [table_row(r) for r in results]
    fields = list(table_row({"mode": "", "instances": 0, "agents": 0, "status": ""}).keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else (round(v, 3) if isinstance(v, float) else v)) for k, v in row.items()})


def write_png(path: Path, report: dict) -> None:
    """Left: agent-steps/s against instance count per mode. Right: CPU % (left axis) and memory (right axis)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    results = report["results"]
    cores = report["machine"]["cores_logical"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.4))
    mem = ax2.twinx()
    colors = {"headless": "tab:blue", "windowed": "tab:orange"}
    for mode in MODES:
        ok = sorted(_ok(results, mode), key=lambda r: r["instances"])
        if not ok:
            continue
        xs = [r["instances"] for r in ok]
        rows = [table_row(r) for r in ok]
        sps = [r["agent_steps_per_s"] for r in rows]
        ax1.plot(xs, sps, "o-", color=colors[mode], label=mode)
        for x, y in zip(xs, sps):
            ax1.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
        ax2.plot(xs, [r["cpu_pct_all_instances"] for r in rows], "o-", color=colors[mode],
                 label=f"{mode}: CPU % of all instances")
        ax2.plot(xs, [r["machine_cpu_pct"] for r in rows], "^:", color=colors[mode], alpha=0.6,
                 label=f"{mode}: machine CPU %")
        mem.plot(xs, [r["rss_mb_per_instance"] for r in rows], "s--", color=colors[mode], alpha=0.8,
                 label=f"{mode}: resident MB per instance")
    ax1.set_yscale("log")
    ax1.set_ylabel("agent-steps / s (log scale)")
    agents = results[0]["agents"] if results else "?"
    ax1.set_title(f"throughput ({agents} agents per instance)", fontsize=10)
    ax1.legend(fontsize=8)
    ax2.axhline(100 * cores, color="k", lw=0.8, ls="--")
    ax2.set_ylim(0, 100 * cores * 1.1)
    ax2.set_ylabel(f"CPU % of one core (all {cores} cores = {100 * cores}%)")
    mem.set_ylim(bottom=0)
    mem.set_ylabel("resident memory per instance (MB)")
    ax2.set_title("cost: CPU (solid, dotted) and memory (dashed)", fontsize=10)
    h1, l1 = ax2.get_legend_handles_labels()
    h2, l2 = mem.get_legend_handles_labels()
    if h1 or h2:
        ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    ticks = sorted({r["instances"] for r in results}) or [1]
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel("instances")
        ax.grid(alpha=0.3, which="both")
    fig.suptitle(report["verdict"], fontsize=8, wrap=True)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(out_dir: Path, report: dict, png: bool = True) -> None:
    """profile.json, profile.csv, profile.md (and profile.png); each file replaced atomically (OutputError in one
    line when the disk refuses one: the previous version of each file stays)."""
    report["verdict"] = verdict(report["results"], report["machine"]["cores_logical"])
    if camera.summary(report):
        report["verdict"] += "; " + camera.summary(report)

    def atomic(name, write):
        try:
            with atomic_output(out_dir / name) as tmp:  # keeps the suffix: matplotlib picks the format from it
                write(tmp)
        except OSError as e:
            raise write_error(out_dir / name, e) from None

    atomic("profile.json", lambda p: p.write_text(json.dumps(report, indent=1, default=str)))
    atomic("profile.csv", lambda p: write_csv(p, report["results"]))
    atomic("profile.md", lambda p: p.write_text(markdown(report)))
    if png:
        atomic("profile.png", lambda p: write_png(p, report))
