"""
recbole_attn.upstream.assemble
##############################

From the definitions a set of model classes needs (:mod:`recbole_attn.upstream.bundle`)
to files: a model class in its own file, any other definition in the one file all of its
users are in, or in the shared module; definitions in import order, each file's imports.
"""

from dataclasses import dataclass

from recbole_attn.upstream.bundle import BundleError, Bundler


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
