"""
recbole_attn.upstream.assemble
##############################

From the definitions a set of model classes needs (:mod:`recbole_attn.upstream.bundle`)
to files: a model class in its own file, any other definition in the one file all of its
users are in, or in the shared module; definitions in import order, each file's imports.
"""

import re
import sys
from dataclasses import dataclass

from recbole_attn.upstream.bundle import BundleError, Bundler
from recbole_attn.errors import ExportError


def module_order(bundler, units):
    """Modules in an order where each comes after the ones it imports (import time)."""
    order, state = [], {}

    def visit(name):
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            return  # a lazy (function-level) import cycle: import time is fine
        state[name] = "visiting"
        module = bundler.module(name)
        for binding in module.imports.values():
            if binding[0] == "module":
                visit(binding[1])
            elif binding[0] == "from":
                visit(binding[1])
        state[name] = "done"
        order.append(name)

    for unit in units:
        visit(unit.module)
    return order


def place(units, roots):
    """File of every unit: ``roots`` ({key: file}) are fixed; any other unit goes to the
    file of all its users when they are in one file, else to ``None`` (shared)."""
    users = {key: set() for key in units}
    for key, unit in units.items():
        for need in unit.needs:
            users[need].add(key)
    placement = dict(roots)
    changed = True
    while changed:
        changed = False
        for key in units:
            if key in placement:
                continue
            files = {placement.get(user, "?") for user in users[key]}
            if "?" in files:
                continue
            placement[key] = files.pop() if len(files) == 1 else None
            changed = True
    for key in units:  # definitions in a cycle of users: shared
        placement.setdefault(key, None)
    # a shared definition that needs one placed in a model file: move that one to shared
    changed = True
    while changed:
        changed = False
        for key, unit in units.items():
            if placement[key] is None:
                for need in unit.needs:
                    if placement[need] is not None:
                        placement[need] = None
                        changed = True
    return placement


def unit_text(bundler, unit):
    """The unit's source lines with its dropped lines and cuts applied."""
    module = bundler.module(unit.module)
    cuts = {}
    for line, start, end, text in unit.cuts:
        cuts.setdefault(line, []).append((start, end, text))
    added = dict(unit.added)
    out = []
    for number in range(unit.start, unit.end + 1):
        if number in added:
            out.append(added[number])
        if any(a <= number <= b for a, b in unit.dropped):
            continue
        text = module.lines[number - 1]
        if number in cuts:
            raw = text.encode("utf-8")
            for start, end, new in sorted(cuts[number], reverse=True):
                raw = raw[:start] + new.encode("utf-8") + raw[end:]
            text = raw.decode("utf-8")
        out.append(text)
    return "".join(out)


@dataclass
class File:
    """What :func:`bundle` puts in one output file."""

    units: list
    external: list
    #: {file (None: shared) -> [names imported from it]}
    imports: dict


def bundle(roots):
    """Bundle the model classes ``roots`` (``{(module, class): file}``).

    Returns ``({file or None: File}, bundler)``: the shared module's contents under None.
    """
    bundler = Bundler()
    units = bundler.collect(list(roots))
    placement = place(units, roots)
    order = {name: i for i, name in enumerate(module_order(bundler, units.values()))}
    files = {}
    for key in sorted(units, key=lambda k: (order[k[0]], units[k].start)):
        where = placement[key]
        entry = files.setdefault(where, File([], [], {}))
        entry.units.append(units[key])
    for where, entry in files.items():
        names = {}
        for unit in entry.units:
            for name in unit.names:
                if name in names and names[name] != unit.module:
                    raise BundleError(
                        f"{name} is defined in {names[name]} and {unit.module}; both "
                        f"would land in {where or 'the shared module'}: rename one"
                    )
                names[name] = unit.module
        externals = []
        for unit in entry.units:
            for text in sorted(unit.external):
                if text not in externals:
                    externals.append(text)
            for need in unit.needs:
                other = placement[need]
                if other != where:
                    imported = entry.imports.setdefault(other, [])
                    if need[1] not in imported:
                        imported.append(need[1])
        entry.external = externals
        locals_ = {}
        for text in externals:
            local = text.split(" as ")[-1].split(" import ")[-1].split(".")[0]
            local = local.split()[-1]
            if local in locals_ and locals_[local] != text:
                raise BundleError(f"'{text}' and '{locals_[local]}' bind {local}")
            locals_[local] = text
    return files, bundler


def import_lines(texts, internal):
    """``import`` lines: the standard library, third-party packages, then RecBole and
    ``internal`` (``[(module, [names])]``); ``from`` imports of one module merged."""
    groups = {0: {}, 1: {}, 2: {}}
    plain = {0: [], 1: [], 2: []}
    for text in texts:
        top = text.split()[1].split(".")[0]
        group = 0 if top in sys.stdlib_module_names else 2 if top == "recbole" else 1
        if text.startswith("from ") and " as " not in text:
            module, name = re.match(r"from (\S+) import (\S+)$", text).groups()
            groups[group].setdefault(module, []).append(name)
        else:
            plain[group].append(text)
    for module, names in internal:
        groups[2].setdefault(module, []).extend(names)
    blocks = []
    for group in (0, 1, 2):
        lines = sorted(set(plain[group])) + [
            f"from {module} import {', '.join(sorted(set(names)))}"
            for module, names in sorted(groups[group].items())
        ]
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def references(where_of, module_of):
    """A function rewriting the dotted references to our code in docstrings and comments
    (``:class:`~recbole_attn.evaluator.metrics.CC```) to where the export put the
    definition (``module_of(where_of[name])``); a reference to one of our modules
    becomes the shared file (``module_of(None)``)."""

    def rewrite(match):
        parts = match.group(0).split(".")
        for i, part in enumerate(parts[1:], 1):
            if part in where_of:
                return ".".join([module_of(where_of[part])] + parts[i:])
        return module_of(None)

    return lambda text: re.sub(r"recbole_attn(?:\.\w+)+", rewrite, text)


def bundled(roots, module_of, what):
    """The bundle of ``roots`` as the export writes it: ``(bundler, rewrite, parts)``
    with ``rewrite`` the :func:`references` rewriter of its names (``module_of``: where a
    file's definitions go) and ``parts`` ``[(where, entry, internal imports, body)]``, one
    per file. A name the bundler cannot follow is an :class:`ExportError` (``what``: what
    could not be exported)."""
    try:
        files, bundler = bundle(roots)
    except BundleError as error:
        raise ExportError(f"cannot export {what}: {error}") from None
    rewrite = references(
        {n: where for where, e in files.items() for u in e.units for n in u.names},
        module_of,
    )
    parts = []
    for where, entry in files.items():
        internal = [(module_of(other), names) for other, names in entry.imports.items()]
        body = "\n\n".join(
            rewrite(unit_text(bundler, unit)).rstrip("\n") for unit in entry.units
        )
        parts.append((where, entry, internal, body))
    return bundler, rewrite, parts
