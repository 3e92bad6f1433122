"""Names of the files and folders a run writes (time and a random token, claimed by
exclusive creation: RecBole's names by the second collide), atomic writes, safe yaml."""

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import tempfile
import time

import yaml

from recbole_attn.errors import (
    ConfigError,
    ExistingOutputError,
    RecboleAttnError,
    not_text_message,
    write_failure,
)


def run_stem(*parts):
    """A run's name, unique across runs: ``<parts>-<time>-<6 hex>``."""
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    return "-".join([*map(str, parts), stamp, secrets.token_hex(3)])


def claim_file(folder, stem, suffix):
    """Create ``<folder>/<stem><suffix>`` exclusively; its path."""
    os.makedirs(folder, exist_ok=True)
    while True:
        path = os.path.join(folder, f"{stem}{suffix}")
        try:
            with open(path, "x"):
                return path
        except FileExistsError:
            stem = f"{stem}-{secrets.token_hex(2)}"


def claim_folder(path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    candidate = path
    while True:
        try:
            os.mkdir(candidate)
            return candidate
        except FileExistsError:
            candidate = f"{path}-{secrets.token_hex(2)}"


def release_if_empty(path):
    """Remove a claimed file that was never written."""
    with contextlib.suppress(OSError):
        if path and os.path.isfile(path) and os.path.getsize(path) == 0:
            os.remove(path)


def refuse_existing(paths, what, overwrite=False, flag="--overwrite", error=None):
    """An :class:`ExistingOutputError` naming the existing ``paths``."""
    existing = [p for p in paths if os.path.exists(p)]
    if existing and not overwrite:
        raise (error or ExistingOutputError)(_existing_message(what, existing, flag))


def check_output_file(paths, what, overwrite=False, flag="--overwrite"):
    """Before any work: each of ``paths`` can be written."""
    for path in paths:
        if os.path.isdir(path):
            raise RecboleAttnError(f"{what}: {path} is a folder; give a file name")
    refuse_existing(paths, what, overwrite, flag)
    for folder in sorted({os.path.dirname(os.path.abspath(p)) for p in paths}):
        existing = folder
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        try:  # mkstemp fails where ``existing`` is a file: _why says so
            fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-probe-")
            os.close(fd)
            os.remove(probe)
        except OSError as err:
            raise RecboleAttnError(
                f"{what}: cannot write into {folder} ({_why(existing, err)}); choose a "
                "place you can write to"
            ) from None


def _existing_message(what, existing, flag):
    shown = ", ".join(existing[:3]) + (" ..." if len(existing) > 3 else "")
    return (
        f"{what} would replace {shown}; choose another output, or pass {flag} to "
        "replace them"
    )


def read_text(path, what="file", encoding="utf-8"):
    """The text of ``path``; a :class:`RecboleAttnError` naming it if unreadable."""
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


_READ = {}  # (real path, mtime, size) -> text


def read_once(path, what="file"):
    """:func:`read_text`, once per process and version of the file."""
    try:
        stat = os.stat(path)
        key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    except OSError:
        return read_text(path, what)  # says what is wrong with it
    if key not in _READ:
        _READ[key] = read_text(path, what)
    return _READ[key]


#: a config file's limits: size, values its aliases expand to ("billion laughs"), digits
MAX_YAML_CHARS = 1_000_000
MAX_YAML_VALUES = 100_000
MAX_NUMBER_CHARS = 50  # a float's 17 digits, its sign and exponent, three times over


def safe_yaml(text, where):
    """``yaml.safe_load(text)`` within limits (size, aliases, numbers, keys given
    twice); a :class:`ConfigError` naming ``where``."""
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
    numbers = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
    merge_tag = "tag:yaml.org,2002:merge"

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
            if node.tag in numbers and len(node.value) > MAX_NUMBER_CHARS:
                raise ConfigError(
                    f"{where}, line {line(node)}: a number of {len(node.value):,} "
                    f"characters; numbers are at most {MAX_NUMBER_CHARS}"
                )
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            seen = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != merge_tag:
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
    """The ``key: value`` mapping of a config file (None if empty), checked."""
    with contextlib.suppress(OSError):  # else read_once says what is wrong with it
        if os.path.getsize(path) > MAX_YAML_CHARS * 4:  # before reading it
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


def check_writable_folder(path, key):
    """``path`` is a folder this process can write into."""
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
    """Write ``path`` through ``write(f)`` atomically (mode 0o666 before umask)."""
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


#: this machine, in the names of temporary files and claims (a pid is per machine)
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:6]


def owner_tag():
    return f"{_HOST}-{os.getpid()}"


def owner_gone(tag):
    """Whether the process of ``tag`` has ended (one of another machine never is)."""
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
    """``(fd, name)`` of a new temporary file beside ``path``."""
    remove_stale_temporaries(path)
    tmp = os.path.join(
        os.path.dirname(os.path.abspath(path)),
        f".{os.path.basename(path)}.{owner_tag()}-{secrets.token_hex(4)}.tmp",
    )
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp


_TEMPORARY = re.compile(r"^\..+\.([0-9a-f]{6}-[0-9]+)-[0-9a-f]{8}\.tmp$")


def remove_stale_temporaries_in(folder, prefix="."):
    """Remove the temporaries in ``folder`` whose writer was killed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _TEMPORARY.match(name)
        if match and name.startswith(prefix) and owner_gone(match.group(1)):
            _unlink_quietly(os.path.join(folder, name))


def remove_stale_temporaries(path):
    """Remove the temporary files of ``path`` whose writer was killed."""
    folder, name = os.path.split(os.path.abspath(path))
    remove_stale_temporaries_in(folder, f".{name}.")


def write_files(files, what="the output", overwrite=False, remove=(), error=None):
    """Write ``files`` (path -> text, bytes or ``write(f)``) all-or-nothing, never over
    what another process made (hard links publish them, unless ``overwrite``)."""
    error = error or ExistingOutputError
    # what cannot be written is not an existing file (ExistingOutputError is one)
    failure = RecboleAttnError if error is ExistingOutputError else error
    if not overwrite:
        refuse_existing(files, what, error=error)
    else:  # a publish of these files whose writer was killed midway: finished first
        finish_publishes(files, what=what)
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
                with (
                    os.fdopen(fd, "wb")
                    if isinstance(content, bytes)
                    else os.fdopen(fd, "w", encoding="utf-8", newline="\n")
                ) as f:
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
        if overwrite:  # the temporaries stay listed until they are the targets
            _replace_journaled(temps, what, failure)
        for target in files if not overwrite else ():
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


def _journal_path(target):
    """The record of a publish whose last file is ``target``, beside it."""
    folder, name = os.path.split(os.path.abspath(target))
    return os.path.join(folder, f".{name}.publish.json")


def _replace_journaled(temps, what, failure):
    """Replace each target of ``temps`` (target -> its new version, written) by its new
    version: either all are replaced or none (the old versions are kept aside until
    every one is, and put back if one cannot be); the plan is recorded first beside the
    last target, so that a rerun finishes a publish whose writer was killed midway
    (:func:`finish_publishes`). Emptied entries of ``temps`` are the replaced ones."""
    targets = list(temps)
    if not targets:
        return
    journal = _journal_path(targets[-1])
    olds, replaced, doing = {}, [], ("keep the old version of", targets[0])
    try:
        for target in targets:
            doing = ("keep the old version of", target)
            if os.path.isfile(target):
                olds[target] = _keep_aside(target)
        plan = {
            "owner": owner_tag(),
            "files": [[t, temps[t], olds.get(t)] for t in targets],
        }
        doing = ("write", journal)
        write_replacing(journal, lambda f: json.dump(plan, f, indent=1))
        for target in targets:
            doing = ("replace", target)
            os.replace(temps[target], target)
            replaced.append(target)
            del temps[target]
    except BaseException as err:
        undone = _put_back(replaced, olds)
        if undone:
            _unlink_quietly(journal)
            for old in olds.values():
                _unlink_quietly(old)
        else:  # the rerun finishes it: the plan and the new versions left stay
            temps.clear()
        if not isinstance(err, OSError):
            raise
        verb, target = doing
        reason, advice = write_failure(err, target)
        state = (
            "nothing was changed"
            if undone
            else f"{len(replaced)} of {len(targets)} files are new and could not be "
            f"put back (the publish is recorded in {journal}, which the same command "
            "finishes)"
        )
        raise failure(
            f"{what}: cannot {verb} {target} ({reason}); {state}: {advice}"
        ) from None
    _unlink_quietly(journal)  # done
    for old in olds.values():
        _unlink_quietly(old)


def _keep_aside(target):
    """A second name for ``target``'s current version (a hard link, else a copy)."""
    fd, aside = _temporary(target)  # the name, claimed
    os.close(fd)
    os.unlink(aside)
    try:
        os.link(target, aside)
    except OSError:  # a file system without hard links
        shutil.copy2(target, aside)
    return aside


def _put_back(replaced, olds):
    """Whether the old versions of ``replaced`` are back (a target that was new goes)."""
    try:
        for target in reversed(replaced):
            if target in olds:
                os.replace(olds.pop(target), target)
            else:
                os.unlink(target)
    except OSError:
        return False
    return True


def finish_publishes(paths, what="the output", within=()):
    """Finish each publish (:func:`write_files` with ``overwrite``) recorded beside one
    of ``paths`` whose writer was killed or failed midway: every file it planned is its
    new version. A record names only files in the folders of ``paths`` or under the
    folders ``within`` (a record planted in a folder copied from elsewhere reaches no
    file outside it), each new version beside its file, or it is refused."""
    folders = {os.path.dirname(os.path.abspath(p)) for p in paths}
    roots = [os.path.join(os.path.abspath(r), "") for r in within if r]
    for path in paths:
        journal = _journal_path(path)
        if os.path.isfile(journal):
            _finish(journal, what, folders, roots)


def _finish(journal, what, folders, roots):
    try:
        with open(journal, encoding="utf-8") as f:
            plan = json.load(f)
        owner, entries = plan["owner"], plan["files"]
        entries = [(str(t), str(n), o if o is None else str(o)) for t, n, o in entries]
    except (OSError, ValueError, KeyError, TypeError):
        raise RecboleAttnError(
            f"{what}: {journal} is not a record of a publish this package wrote; "
            "remove it"
        ) from None
    if owner != owner_tag() and not owner_gone(owner):
        raise RecboleAttnError(
            f"{what}: another process ({owner}) is replacing these files (its record "
            f"is {journal}); wait for it to end, then run again"
        )
    for target, new, old in entries:
        target = os.path.abspath(target)
        ours = os.path.dirname(target) in folders
        ours = ours or any(target.startswith(r) for r in roots)
        beside = [p for p in (new, old) if p is not None]
        if not ours or not all(_is_temporary_of(p, target) for p in beside):
            raise RecboleAttnError(
                f"{what}: {journal} names {target}, which this publish does not write "
                "(not a record this package wrote); remove it"
            )
    for target, new, _ in entries:
        if os.path.isfile(new):
            try:
                os.replace(new, target)
            except OSError as err:
                reason, advice = write_failure(err, target)
                raise RecboleAttnError(
                    f"{what}: cannot finish the publish recorded in {journal}: cannot "
                    f"replace {target} ({reason}): {advice}"
                ) from None
    for _, _, old in entries:
        if old is not None:
            _unlink_quietly(old)
    _unlink_quietly(journal)


def _is_temporary_of(path, target):
    """Whether ``path`` is a name :func:`_temporary` gives beside ``target``."""
    folder, name = os.path.split(os.path.abspath(target))
    match = _TEMPORARY.match(os.path.basename(path))
    return (
        os.path.dirname(os.path.abspath(path)) == folder
        and match is not None
        and os.path.basename(path).startswith(f".{name}.")
    )


def _publish_new(tmp, target, what, error):
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


def _why(folder, err):
    path = folder
    while path and not os.path.exists(path):
        path = os.path.dirname(path)
    if path and not os.path.isdir(path):
        return f"{path} is a file, not a folder"
    return err.strerror or str(err)


def _unlink_quietly(path):
    with contextlib.suppress(OSError):
        os.unlink(path)
