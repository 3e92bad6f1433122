"""
recbole_attn.files
##################

Names of the files and folders a run writes. RecBole names checkpoints and logs by the
second (``<model>-<time>.pth``): two runs started in the same second into one
``checkpoint_dir`` write the same file, and one of them then tests the other's model.
Every name here carries the time and a random token, and is claimed by exclusive
creation, so that no concurrent run can take it; folders and files the user already has
are never written over unless the user asks (:func:`refuse_existing`).
"""

import os
import secrets
import time

from recbole_attn.errors import RecboleAttnError


class ExistingOutputError(RecboleAttnError, FileExistsError):
    """An output would replace files the user already has."""


def run_stem(*parts):
    """``<parts>-<YYYY-mm-dd_HH-MM-SS>-<6 hex>``: a run's name, unique across runs."""
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    return "-".join([*map(str, parts), stamp, secrets.token_hex(3)])


def claim_file(folder, stem, suffix):
    """Create ``<folder>/<stem><suffix>`` exclusively (empty) and return its path; with
    another random token if the name exists. The caller writes the file later (an atomic
    replace of its own empty file)."""
    os.makedirs(folder, exist_ok=True)
    while True:
        path = os.path.join(folder, f"{stem}{suffix}")
        try:
            with open(path, "x"):
                return path
        except FileExistsError:
            stem = f"{stem}-{secrets.token_hex(2)}"


def claim_folder(path):
    """Create folder ``path`` exclusively and return it; with a suffix if it exists."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    candidate = path
    while True:
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            candidate = f"{path}-{secrets.token_hex(2)}"


def release_if_empty(path):
    """Remove a claimed file that was never written (the run ended before saving)."""
    try:
        if path and os.path.isfile(path) and os.path.getsize(path) == 0:
            os.remove(path)
    except OSError:
        pass


def refuse_existing(paths, what, overwrite=False, flag="--overwrite"):
    """An :class:`ExistingOutputError` naming the ``paths`` that exist, unless
    ``overwrite``."""
    existing = [p for p in paths if os.path.exists(p)]
    if existing and not overwrite:
        shown = ", ".join(existing[:3]) + (" ..." if len(existing) > 3 else "")
        raise ExistingOutputError(
            f"{what} would replace {shown}; choose another output, or pass {flag} to "
            "replace them"
        )


def check_writable_folder(path, key):
    """``path`` is (or can be created as) a folder this process can write into, checked
    by writing a probe file; a :class:`RecboleAttnError` naming ``key`` otherwise."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise RecboleAttnError(f"{key} {path} is a file, not a folder; choose a folder")
    try:
        os.makedirs(path, exist_ok=True)
        probe = claim_file(path, f".write-probe-{secrets.token_hex(3)}", "")
        os.remove(probe)
    except OSError as err:
        raise RecboleAttnError(
            f"cannot write into {key} {path} ({err.strerror or err}); choose a folder "
            "you can write to"
        ) from None
