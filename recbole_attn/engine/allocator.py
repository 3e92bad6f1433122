"""Freed tensors kept for the next training step: glibc's mmap and trim thresholds raised
for the command's training runs (docs/environment.md, "Memory")."""

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
    return _DONE[0] if _DONE else "memory allocator: the C library's defaults"


def keep_freed_memory():
    """Set glibc's thresholds once; the log line of what was done."""
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
