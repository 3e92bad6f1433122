"""Freed tensors kept for the next step (recbole_attn.engine.allocator): with glibc, a step's
large tensors come from the heap, which keeps them when freed; a user's own settings
stand."""

import platform
import subprocess
import sys

import pytest

from recbole_attn.engine import allocator

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="glibc's mallopt",
)

#: four 20 MB tensors of a step, made and freed, before and after keep_freed_memory (one
#: fresh process): prints, each time, whether glibc placed them in the heap (not each in
#: a mapping of its own, unmapped when freed) and how many MB the heap gave back to the
#: kernel when they were freed
STEPS = """
import sys, torch
from recbole_attn.engine import allocator
def heap():
    for line in open("/proc/self/maps"):
        if line.rstrip().endswith("[heap]"):
            return [int(x, 16) for x in line.split()[0].split("-")]
    return 0, 0
def step():
    tensors = [torch.ones(5 * 2**20) for _ in range(4)]
    start, end = heap()
    in_heap = all(start <= t.data_ptr() < end for t in tensors)
    del tensors
    print(int(in_heap), (end - heap()[1]) >> 20)
step()
print(allocator.keep_freed_memory(), file=sys.stderr)
step()
"""


@glibc
def test_a_steps_tensors_stay_in_the_heap_for_the_next_step():
    done = subprocess.run(
        [sys.executable, "-c", STEPS], capture_output=True, text=True, check=True
    )
    before, after = (
        [int(v) for v in line.split()] for line in done.stdout.split("\n")[:2]
    )
    assert (
        before[0] == 0
    )  # glibc's defaults: mappings of their own, unmapped when freed
    assert after == [1, 0]  # in the heap, nothing given back: no new pages next step
    assert "kept for the next step" in done.stderr


def test_a_users_own_malloc_settings_stand(monkeypatch):
    monkeypatch.setattr(allocator, "_DONE", [])
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")

    def untouched(*args):
        raise AssertionError("mallopt called despite the user's setting")

    monkeypatch.setattr(allocator.ctypes, "CDLL", untouched)
    line = allocator.keep_freed_memory()
    assert line == "memory allocator: yours (MALLOC_TRIM_THRESHOLD_ set)"


def test_the_line_is_said_once_per_process():
    first = allocator.keep_freed_memory()
    assert allocator.keep_freed_memory() == first
    assert first.startswith("memory allocator: ")


def test_the_commands_training_run_keeps_freed_memory_first(monkeypatch):
    """``recbole-attn --model=...`` (one model in its process) sets the allocator before
    it trains; the library's ``quick_start.run`` leaves it to the caller."""
    from types import SimpleNamespace

    from recbole_attn.commands import run as command
    from recbole_attn.engine import quick_start

    calls = []
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append("kept"))

    def run(*args, **kwargs):
        calls.append("run")
        return {"best_valid_result": {}, "test_result": {}, "saved_model_file": None}

    monkeypatch.setattr(quick_start, "run", run)
    args = SimpleNamespace(
        model="STOSA", dataset="ml-100k", verbose=False, config_files=None, overrides={}
    )
    assert command.train(args) == 0
    assert calls == ["kept", "run"]
