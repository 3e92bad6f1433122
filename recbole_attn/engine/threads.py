"""
recbole_attn.engine.threads
###########################

How many CPU threads torch gets in a run (``threads``; ``--threads=N`` sets it).

By default, the cores that are idle when the run starts, at least one and at most torch's
own default (the cores the process may use): on a quiet machine every core, beside another
job the cores it leaves. Measured on a 2-core machine (STOSA, ml-100k, one epoch; README,
"Threads"): two threads train an epoch in 0.66 s for 1.3 s of CPU, one thread in 1.0 s for
1.0 s, so on a quiet machine two threads are 1.5x faster for 1.3x the CPU; beside another
job, two threads spin against it (2.4-3.7x the CPU of one), so one thread is faster and
cheaper. On a GPU the run keeps torch's default.

Idle cores are read from Linux's ``/proc/stat`` (the process's own cores, over a fraction
of a second); elsewhere the run keeps torch's default.
"""

import os
import time

import torch

#: seconds over which the idle cores are measured
INTERVAL = 0.3
#: torch's own default, as the process started (its cores, or OMP_NUM_THREADS): the most
#: threads the rule gives, whatever an earlier run in the process set
TORCH_DEFAULT = torch.get_num_threads()


def _read_stat():
    with open("/proc/stat") as f:
        return f.read()


def cpu_times(stat, cores):
    """``(idle, total)`` ticks of the given cores in the text of ``/proc/stat`` (idle
    includes iowait; guest time is already in user time and is not added twice)."""
    idle = total = 0
    for line in stat.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            ticks = [int(v) for v in fields[:8]]
            idle += ticks[3] + ticks[4]
            total += sum(ticks)
    return idle, total


def idle_cores(read=_read_stat, sleep=time.sleep, interval=INTERVAL):
    """How many of the process's cores were idle over ``interval`` seconds (a float), or
    None where ``/proc/stat`` cannot tell."""
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
    """``(count, why)``: ``threads`` when set, else the rule of this module (``idle``:
    the idle-core count, :func:`idle_cores` by default)."""
    idle = idle or idle_cores
    default = TORCH_DEFAULT
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
    """Give torch the run's thread count; returns the log line that says why."""
    count, why = choose_threads(config["threads"], config["device"])
    torch.set_num_threads(count)
    return f"CPU threads: {count} ({why}; --threads=N sets it)"
