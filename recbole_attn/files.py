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

import errno
import hashlib
import os
import re
import secrets
import shutil
import socket
import tempfile
import time

import yaml

from recbole_attn.errors import ConfigError, ExistingOutputError, RecboleAttnError


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


def refuse_existing(paths, what, overwrite=False, flag="--overwrite", error=None):
    """An :class:`ExistingOutputError` (or ``error``) naming the ``paths`` that exist,
    unless ``overwrite``."""
    existing = [p for p in paths if os.path.exists(p)]
    if existing and not overwrite:
        raise (error or ExistingOutputError)(_existing_message(what, existing, flag))


def check_output_file(paths, what, overwrite=False, flag="--overwrite"):
    """Before any work: each of ``paths`` (the files of one output) can be written. A
    :class:`RecboleAttnError` when one is a folder, or lies under a file or in a folder
    this process cannot write into (tried with a probe file in the nearest folder that
    exists); an :class:`ExistingOutputError` when one exists, unless ``overwrite``."""
    for path in paths:
        if os.path.isdir(path):
            raise RecboleAttnError(f"{what}: {path} is a folder; give a file name")
    refuse_existing(paths, what, overwrite, flag)
    for folder in sorted({os.path.dirname(os.path.abspath(p)) for p in paths}):
        existing = folder
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise RecboleAttnError(
                f"{what}: cannot write into {folder} ({existing} is a file, not a "
                "folder); choose a place you can write to"
            )
        try:
            fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-probe-")
            os.close(fd)
            os.remove(probe)
        except OSError as err:
            raise RecboleAttnError(
                f"{what}: cannot write into {folder} ({err.strerror or err}); choose a "
                "place you can write to"
            ) from None


def _existing_message(what, existing, flag):
    shown = ", ".join(existing[:3]) + (" ..." if len(existing) > 3 else "")
    return (
        f"{what} would replace {shown}; choose another output, or pass {flag} to "
        "replace them"
    )


def read_text(path, what="file", encoding="utf-8"):
    """The text of ``path``; a :class:`RecboleAttnError` that names the file when it is
    missing, not a file, unreadable or not ``encoding`` text (a binary file, or one saved
    in another encoding such as latin-1)."""
    if not os.path.exists(path):
        raise RecboleAttnError(f"{what} not found: {path}")
    if not os.path.isfile(path):
        raise RecboleAttnError(f"{what} {path} is not a file")
    try:
        with open(path, encoding=encoding) as f:
            return f.read()
    except UnicodeDecodeError as err:
        byte = err.object[err.start : err.start + 1]
        raise RecboleAttnError(
            not_text_message(path, byte, err.start, what, encoding)
        ) from None
    except OSError as err:
        raise RecboleAttnError(
            f"cannot read {what} {path}: {err.strerror or err}"
        ) from None


#: (real path, modification time, size) -> text of the files :func:`read_once` read
_READ = {}


def read_once(path, what="file"):
    """:func:`read_text` of ``path``, read from disk once per process and version of the
    file (its modification time and size): a run's yaml files are parsed by several
    steps of its preparation (checks, the user's options, RecBole's ``Config``, the
    unknown-key warning), and each reads this one text."""
    try:
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        return read_text(path, what)  # says what is wrong with it
    if key not in _READ:
        _READ[key] = read_text(path, what)
    return _READ[key]


#: the limits of a config file: its size, the values its aliases expand to (a yaml
#: "billion laughs" file is a few lines whose values, printed, never end), the length of
#: a number (Python refuses to convert an integer of more than 4,300 digits)
MAX_YAML_CHARS = 1_000_000
MAX_YAML_VALUES = 100_000
MAX_NUMBER_CHARS = 100


def safe_yaml(text, where):
    """``yaml.safe_load(text)`` within limits: a :class:`ConfigError` naming ``where``
    (the file) for a text over :data:`MAX_YAML_CHARS`, aliases that expand to more than
    :data:`MAX_YAML_VALUES` values or refer to themselves, a number longer than
    :data:`MAX_NUMBER_CHARS` characters, or a key given twice in one mapping (both lines
    named; yaml would silently keep the last). ``yaml.YAMLError`` propagates."""
    if len(text) > MAX_YAML_CHARS:
        raise ConfigError(
            f"{where}: {len(text):,} characters; a config file holds at most "
            f"{MAX_YAML_CHARS:,}"
        )
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        _check_yaml_nodes(node, where)
    return yaml.safe_load(text)


def _check_yaml_nodes(root, where):
    sizes, open_nodes = {}, set()
    int_tag, float_tag = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"

    def line(node):
        return node.start_mark.line + 1

    def size(node):  # the values the node expands to, each alias counted in full
        if id(node) in sizes:
            return sizes[id(node)]
        if id(node) in open_nodes:
            raise ConfigError(
                f"{where}, line {line(node)}: an alias refers to the value that holds "
                "it (a value without end); write the value out"
            )
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.ScalarNode):
            if node.tag in (int_tag, float_tag) and len(node.value) > MAX_NUMBER_CHARS:
                raise ConfigError(
                    f"{where}, line {line(node)}: a number of {len(node.value):,} "
                    f"characters; numbers are at most {MAX_NUMBER_CHARS}"
                )
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            seen = {}
            for key, value in node.value:
                if (
                    isinstance(key, yaml.ScalarNode)
                    and key.tag != "tag:yaml.org,2002:merge"
                ):
                    if (key.tag, key.value) in seen:
                        raise ConfigError(
                            f"{where}: {key.value} is given twice, on lines "
                            f"{seen[(key.tag, key.value)]} and {line(key)} (yaml "
                            "would keep the last silently); keep one"
                        )
                    seen[(key.tag, key.value)] = line(key)
                total += size(key) + size(value)
        open_nodes.discard(id(node))
        if total > MAX_YAML_VALUES:
            raise ConfigError(
                f"{where}, line {line(node)}: its aliases expand to more than "
                f"{MAX_YAML_VALUES:,} values; write a config file without such aliases"
            )
        sizes[id(node)] = total
        return total

    size(root)


def read_yaml(path):
    """The ``key: value`` mapping of a config file (None if it is empty), read once
    (:func:`read_once`) and within limits (:func:`safe_yaml`: size, aliases, numbers,
    keys given twice); a :class:`ConfigError` naming the file and line when it is not
    valid yaml, or when its top level is not ``key: value`` lines."""
    try:
        too_big = os.path.getsize(path) > MAX_YAML_CHARS * 4  # before reading it
    except OSError:
        too_big = False  # read_once says what is wrong with it
    if too_big:
        raise ConfigError(
            f"{path}: {os.path.getsize(path):,} bytes; a config file holds at most "
            f"{MAX_YAML_CHARS:,} characters"
        )
    try:
        data = safe_yaml(read_once(path, "config file"), path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(
            f"{path}{where}: not valid yaml ({problem}); config files hold "
            "'key: value' lines"
        ) from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(
            f"{path}: a config file holds 'key: value' lines, got a "
            f"{type(data).__name__} at its top level"
        )
    return data


def not_text_message(path, byte, position, what="file", encoding="utf-8"):
    """What to say about a file that ``encoding`` cannot decode: ``byte`` (bytes) at
    ``position`` is the first it cannot."""
    return (
        f"{what} {path} is not {encoding} text (byte 0x{byte.hex()} at position "
        f"{position}): is it a binary file, or saved in another encoding? Save it as "
        f"{encoding}"
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


def write_replacing(path, write, binary=False):
    """Write ``path`` through ``write(f)`` into a new file beside it, renamed over ``path``
    when complete: an interrupted write never leaves a truncated file (a checkpoint
    rewritten every epoch). Permissions follow the user's umask (mode 0o666 before it;
    ``tempfile.mkstemp`` would force 0o600). ``OSError`` and what ``write`` raises
    propagate: the caller says what to do. Several files at once, all or nothing, and
    never over another run's: :func:`write_files`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = _temporary(path)
    try:
        with (
            os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        ) as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


#: this machine, in the names of temporary files and claims (a pid means something on
#: its own machine only)
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def owner_tag():
    """``<host>-<pid>``: who writes a temporary file or holds a claim."""
    return f"{_HOST}-{os.getpid()}"


def owner_gone(tag):
    """Whether the process of ``tag`` (:func:`owner_tag`) has ended: a process of this
    machine that no longer exists (one of another machine is never taken for gone)."""
    host, _, pid = str(tag).strip().rpartition("-")
    if host != _HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _temporary(path):
    """``(fd, name)`` of a new file beside ``path``, open for writing: created exclusively
    under a name of its writer (:func:`owner_tag`) and a random token, mode 0o666 before
    the user's umask (``tempfile.mkstemp`` would force 0o600). The temporary files of
    writers that were killed (no clean-up ran) are removed first."""
    remove_stale_temporaries(path)
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(path)),
        f".{os.path.basename(path)}.{owner_tag()}-{secrets.token_hex(4)}.tmp",
    )
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp


#: the name of a temporary file of :func:`_temporary`: ``.<name>.<owner>-<token>.tmp``
_TEMPORARY = re.compile(r"^\..+\.([0-9a-f]{6}-[0-9]+)-[0-9a-f]{8}\.tmp$")


def remove_stale_temporaries_in(folder):
    """Remove every temporary file in ``folder`` whose writer was killed before its
    clean-up (a run's checkpoints are written under names no later run uses)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _TEMPORARY.match(name)
        if match and owner_gone(match.group(1)):
            _unlink_quietly(os.path.join(folder, name))


def remove_stale_temporaries(path):
    """Remove the temporary files of ``path`` (``.<name>.<host>-<pid>-<token>.tmp``)
    whose writer was killed before its clean-up; those of a live writer stay."""
    folder = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}."
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        owner = name[len(prefix) : -len(".tmp")].rpartition("-")[0]
        if owner_gone(owner):
            _unlink_quietly(os.path.join(folder, name))


def write_files(files, what="the output", overwrite=False, remove=(), error=None):
    """Write several files all-or-nothing, never over what another process made.

    ``files`` maps target paths to their text (or to a function writing into an open text
    file). Each is written to a temporary file in its target's folder; when all are
    complete they are published: with ``overwrite`` renamed over the targets
    (``os.replace``), without it hard-linked into place, which fails if the target exists
    at that moment, so that two runs writing one output cannot both succeed (the first
    one's files stay; the second gets the error, and none of its files is left). Paths in
    ``remove`` (stale files of an older version) are deleted afterwards. ``error``: the
    exception class raised for an existing target (default
    :class:`ExistingOutputError`).
    """
    error = error or ExistingOutputError
    # what cannot be written is not an existing file (ExistingOutputError is one)
    failure = RecboleAttnError if error is ExistingOutputError else error
    targets = list(files)
    if not overwrite:
        refuse_existing(targets, what, error=error)
    temps, published = {}, []
    try:
        for target, content in files.items():
            if os.path.isdir(target):
                raise failure(f"{what}: {target} is a folder; give a file name")
            folder = os.path.dirname(os.path.abspath(target))
            try:
                os.makedirs(folder, exist_ok=True)
                fd, tmp = _temporary(target)
            except OSError as err:
                raise failure(
                    f"{what}: cannot write into {folder} ({_why(folder, err)}); "
                    "choose a place you can write to"
                ) from None
            temps[target] = tmp
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
                    if callable(content):
                        content(f)
                    else:
                        f.write(content)
            except OSError as err:  # a full disk, a quota, a file-size limit
                reason, advice = write_failure(err, target)
                raise failure(
                    f"{what}: writing {target} failed ({reason}); nothing was "
                    f"written: {advice}"
                ) from None
        for target in targets:
            if overwrite:
                os.replace(temps.pop(target), target)
                continue
            _publish_new(temps[target], target, what, error)
            published.append(target)
    except BaseException:
        for target in published:  # all or nothing: what this call made goes again
            _unlink_quietly(target)
        raise
    finally:
        for tmp in temps.values():
            _unlink_quietly(tmp)
    for path in remove:
        if path not in files and os.path.exists(path):
            os.unlink(path)


def _publish_new(tmp, target, what, error):
    """Give the complete file ``tmp`` the name ``target`` unless ``target`` exists."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise error(_existing_message(what, [target], "--overwrite")) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
            raise
        # a file system without hard links: claim the name, then copy into it
        try:
            with open(target, "x"):
                pass
        except FileExistsError:
            raise error(_existing_message(what, [target], "--overwrite")) from None
        shutil.copyfile(tmp, target)


#: errno -> (what it means for the user, what to do; ``{folder}``: the file's folder)
_WRITE_FAILURES = {
    errno.ENOSPC: ("the disk is full", "free space under {folder}"),
    errno.EDQUOT: ("the disk quota is used up", "free space in your quota"),
    errno.EFBIG: (
        "the file-size limit of this process was reached (ulimit -f)",
        "raise the limit (ulimit -f unlimited)",
    ),
    errno.EROFS: ("a read-only file system", "choose a folder you can write to"),
    errno.EACCES: ("no permission to write there", "choose a folder you can write to"),
    errno.EPERM: ("no permission to write there", "choose a folder you can write to"),
}


def write_failure(err, path):
    """``(reason, advice)`` for a write of ``path`` that failed with ``err``: the
    system's reason by its errno (a disk full, a quota, a file-size limit, a read-only or
    forbidden folder), found in the exception's chain (torch's zip writer turns the
    ``OSError`` into a ``RuntimeError`` of its own text), and what to do about it."""
    cause = err
    while cause is not None and not isinstance(cause, OSError):
        cause = cause.__cause__ or cause.__context__
    folder = os.path.dirname(os.path.abspath(path))
    if cause is None:
        return "the write did not complete", f"check the disk under {folder}"
    meaning, advice = _WRITE_FAILURES.get(
        cause.errno, (None, f"check the disk under {folder}")
    )
    reason = cause.strerror or str(cause)
    if meaning:
        reason = f"{reason}: {meaning}"
    return reason, advice.format(folder=folder)


def _why(folder, err):
    """Why ``folder`` cannot be made: the file in its way, else the system's reason."""
    path = folder
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    if path and not os.path.isdir(path):
        return f"{path} is a file, not a folder"
    return err.strerror or str(err)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass
