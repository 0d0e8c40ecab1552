"""What profiling costs are read from: the machine's description, and a psutil thread sampling the CPU times, memory
and threads of the instances, of this Python process, of Xvfb and of the whole machine."""

from __future__ import annotations

import os
import platform
import threading
import time
from importlib import metadata
from typing import Optional

import numpy as np
import psutil

from python_trainer.envs.xvfb import user_display, xvfb_binary


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), for reports and recorded fixtures."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(package: str) -> Optional[str]:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def describe_machine() -> dict:
    """The machine a profile ran on: cores, CPU, memory, load, platform, versions, display."""
    vm = psutil.virtual_memory()
    return {
        "cores_logical": psutil.cpu_count(logical=True),
        "cores_physical": psutil.cpu_count(logical=False),
        "cpu_model": cpu_model(),
        "memory_total_mb": round(vm.total / 2**20),
        "memory_available_mb_at_start": round(vm.available / 2**20),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "gymnasium": _version("gymnasium"),
        "display": user_display(),
        "xvfb": xvfb_binary(),
    }


class ResourceSampler:
    """A thread reading CPU times, RSS and threads of given processes (and the machine's CPU) every ``interval`` s.

    ``groups`` maps a role ("instance", "python", "xvfb") to pids. Samples are cumulative readings; `intervals()`
    turns them into per-interval percentages and `summary()` into whole-window averages.
    """

    def __init__(self, groups: dict[str, list[int]], interval: float = 0.25):
        self.interval = float(interval)
        self.procs: list[tuple[str, psutil.Process]] = []
        for role, pids in groups.items():
            for pid in pids:
                try:
                    self.procs.append((role, psutil.Process(pid)))
                except psutil.Error:
                    pass
        self.readings: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="profile-sampler", daemon=True)
        self.cores = psutil.cpu_count() or 1

    def _read(self) -> dict:
        cpu = psutil.cpu_times()._asdict()
        total = sum(v for k, v in cpu.items() if k not in ("guest", "guest_nice"))  # guest time is inside user
        idle = cpu["idle"] + cpu.get("iowait", 0.0)
        row = {"t": time.perf_counter(), "machine_busy": total - idle, "machine_total": total, "procs": {}}
        for role, p in self.procs:
            try:
                with p.oneshot():
                    ct = p.cpu_times()
                    row["procs"][p.pid] = {"role": role, "user": ct.user, "system": ct.system,
                                           "rss": p.memory_info().rss, "threads": p.num_threads()}
            except psutil.Error:  # gone (crashed, or being closed)
                pass
        return row

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.readings.append(self._read())

    def start(self) -> None:
        self.readings.append(self._read())
        self._thread.start()

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.readings.append(self._read())

    def _delta(self, a: dict, b: dict) -> dict:
        """Per-process and machine CPU % (of one core) between two readings."""
        dt = max(b["t"] - a["t"], 1e-9)
        total = max(b["machine_total"] - a["machine_total"], 1e-9)
        out = {"seconds": dt, "machine_cpu_pct": 100.0 * self.cores * (b["machine_busy"] - a["machine_busy"]) / total,
               "procs": {}}
        for pid, pb in b["procs"].items():
            pa = a["procs"].get(pid)
            if pa is None:
                continue
            out["procs"][pid] = {
                "role": pb["role"],
                "cpu_user_pct": 100.0 * (pb["user"] - pa["user"]) / dt,
                "cpu_system_pct": 100.0 * (pb["system"] - pa["system"]) / dt,
                "rss_mb": pb["rss"] / 2**20,
                "threads": pb["threads"],
            }
        return out

    def intervals(self) -> list[dict]:
        """Every sample as JSON-friendly per-interval values (t = seconds since the window began)."""
        if not self.readings:
            return []
        t0 = self.readings[0]["t"]
        rows = []
        for a, b in zip(self.readings, self.readings[1:]):
            d = self._delta(a, b)
            rows.append({
                "t": round(b["t"] - t0, 4),
                "machine_cpu_pct": round(d["machine_cpu_pct"], 2),
                "procs": [{"pid": pid, **{k: (round(v, 2) if isinstance(v, float) else v) for k, v in p.items()}}
                          for pid, p in d["procs"].items()],
            })
        return rows

    def summary(self) -> dict:
        """Whole-window averages: CPU from the first and last readings, memory and threads over all samples."""
        if len(self.readings) < 2:
            return {}
        first, last = self.readings[0], self.readings[-1]
        d = self._delta(first, last)

        def role_stats(role):
            cpu = [p for p in d["procs"].values() if p["role"] == role]
            if not cpu:
                return None
            samples = [p for r in self.readings for p in r["procs"].values() if p["role"] == role]
            return {
                "count": len(cpu),
                "cpu_user_pct": sum(p["cpu_user_pct"] for p in cpu),  # summed over the role's processes
                "cpu_system_pct": sum(p["cpu_system_pct"] for p in cpu),
                "rss_mb_per_process": float(np.mean([p["rss"] for p in samples])) / 2**20,
                "rss_mb_max": max(p["rss"] for p in samples) / 2**20,
                "threads_per_process": float(np.mean([p["threads"] for p in samples])),
            }

        roles = {role: role_stats(role) for role in ("instance", "python", "xvfb")}
        ours = sum(r["cpu_user_pct"] + r["cpu_system_pct"] for r in roles.values() if r)
        py = roles["python"]
        return {"seconds": d["seconds"], "samples": len(self.readings) - 1, "cores": self.cores,
                "machine_cpu_pct": d["machine_cpu_pct"], "ours_cpu_pct": ours,
                "other_cpu_pct": max(0.0, d["machine_cpu_pct"] - ours),
                "python_share_of_ours": (py["cpu_user_pct"] + py["cpu_system_pct"]) / ours if py and ours > 0 else None,
                **roles}
