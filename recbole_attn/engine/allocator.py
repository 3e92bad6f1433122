"""
recbole_attn.engine.allocator
#############################

Freed tensors kept for the next training step (docs/environment.md, "Memory"), for a
process that trains one model: the ``recbole-attn`` command's training runs.

torch takes a CPU tensor's memory from the C library's ``malloc``. glibc's gives large
freed blocks back to the kernel: a block above its mmap threshold (128 KB at first, raised
to the largest block freed, 32 MB at most) is unmapped when freed, and the top of the heap
is trimmed once more than twice that threshold lies free there. A training step frees its
large tensors and the next step asks for the same sizes again (STOSA on ml-100k: the
``[B, h, L, L]`` attention matrices of a batch, 18 MB each), so they came back as fresh
pages that the kernel zero-fills on first touch: 45,000-90,000 page faults an epoch, about
a tenth of its CPU (measured on a 2-core AMD EPYC, one thread).

:func:`keep_freed_memory` sets the mmap threshold to glibc's maximum (32 MB) and the trim
threshold to :data:`TRIM_MB`: the freed blocks stay in the heap and the next step reuses
them (an epoch then faults no page). A run's peak memory stays the same; up to
:data:`TRIM_MB` of freed memory stays with the process after its peak. Only with glibc
(Linux); where the user set ``MALLOC_MMAP_THRESHOLD_`` or ``MALLOC_TRIM_THRESHOLD_``, or
on another C library, nothing changes.

The command sets it (:func:`recbole_attn.cli.run_main`); the library's functions
(``quick_start.run``, ``build``) leave the process's allocator as it is (a program that
trains one model can call :func:`keep_freed_memory` first): in one process that holds
many built models at once (the speed benchmark's 18, 4.4 GB) the same thresholds made
epochs slower, not faster (docs/environment.md).
"""

import ctypes
import os
import platform

#: glibc's ``mallopt`` parameters (malloc.h)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: glibc's largest mmap threshold on 64-bit systems (``HEAP_MAX_SIZE / 2``)
MMAP_THRESHOLD_MAX = 32 * 2**20
#: the free memory the heap keeps at its top before it is given back to the kernel
TRIM_MB = 256
#: the environment variables with which a user sets glibc's thresholds
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")

_DONE = []


def described():
    """The log line of this process's allocator: what :func:`keep_freed_memory` did, or
    the C library's defaults."""
    return _DONE[0] if _DONE else "memory allocator: the C library's defaults"


def keep_freed_memory():
    """Set glibc's thresholds once per process (module docstring); returns the log line
    that says what was done, or why not."""
    if _DONE:
        return _DONE[0]
    given = [name for name in USER_SETTINGS if name in os.environ]
    if given:
        line = f"memory allocator: yours ({', '.join(given)} set)"
    elif platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        line = "memory allocator: the system's (not glibc)"
    else:
        libc = ctypes.CDLL(None)
        done = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX) and libc.mallopt(
            M_TRIM_THRESHOLD, TRIM_MB * 2**20
        )
        line = (
            f"memory allocator: freed blocks up to {TRIM_MB} MB kept for the next step"
            if done
            else "memory allocator: glibc's defaults (mallopt refused)"
        )
    _DONE.append(line)
    return line
