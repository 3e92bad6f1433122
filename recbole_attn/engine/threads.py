"""How many CPU threads torch gets (``threads``; docs/running.md, "Threads"): by default the cores
idle when the run starts (from ``/proc/stat``), between one and torch's default."""

import os
import time

import torch

#: seconds over which the idle cores are measured
INTERVAL = 0.3
#: torch's default as the process started: the most threads the rule gives
TORCH_DEFAULT = torch.get_num_threads()


def _read_stat():
    with open("/proc/stat") as f:
        return f.read()


def cpu_times(stat, cores):
    """``(idle, total)`` ticks of ``cores`` in ``/proc/stat``'s text."""
    idle = total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            ticks = [int(v) for v in fields[:8]]
            idle += ticks[3] + ticks[4]
            total += sum(ticks)
    return idle, total


def idle_cores(read=_read_stat, sleep=time.sleep, interval=INTERVAL):
    """How many of the process's cores were idle over ``interval`` seconds, or None."""
    try:
        cores = os.sched_getaffinity(0)
        idle0, total0 = cpu_times(read(), cores)
        sleep(interval)
        idle1, total1 = cpu_times(read(), cores)
    except (AttributeError, OSError, ValueError, IndexError):
        return None
    if total1 <= total0:
        return None
    return len(cores) * (idle1 - idle0) / (total1 - total0)


def choose_threads(threads, device, idle=None):
    """``(count, why)``: ``threads`` when set, else the idle cores."""
    idle, default = idle or idle_cores, TORCH_DEFAULT
    if threads is not None:
        return int(threads), "threads"
    if torch.device(device).type != "cpu":
        return default, "torch's default (the run is on a GPU)"
    cores = idle()
    if cores is None:
        return default, "torch's default (no idle-core count on this system)"
    count = max(1, min(default, int(cores + 0.5)))
    return count, f"{cores:.1f} of {default} cores idle at the start"


def set_threads(config):
    count, why = choose_threads(config["threads"], config["device"])
    torch.set_num_threads(count)
    return f"CPU threads: {count} ({why}; --threads=N sets it)"
