"""
recbole_attn.upstream.bundle
############################

Our diversity metrics' source, rewritten for RecBole's own evaluator: the top-level
definitions (classes, functions, constants) that a set of roots needs, found by following
the names they use through our modules, and nothing else. (The models need no bundle:
each model file stands alone and is exported as it is, :mod:`recbole_attn.upstream.
sources`.) Each definition keeps its text (docstrings and comments included); what
changes:

* imports of ``recbole_attn`` modules go: a definition that another file needs is imported
  from the file it is placed in, a module alias (``batching.trim``) becomes the bare name;
* our error classes become the builtin they derive from (:data:`SUBSTITUTES`);
* the external imports (torch, numpy, scipy, recbole) a definition uses are recorded.

Where each definition goes, and each file's imports: :mod:`recbole_attn.upstream.assemble`.
"""

import ast
import importlib.util
from dataclasses import dataclass, field

PACKAGE = "recbole_attn"
#: our error classes (the CLI's one-line errors) become the builtin they derive from
SUBSTITUTES = {
    ("recbole_attn.errors", "ConfigError"): "ValueError",
    ("recbole_attn.errors", "CategoryFieldError"): "ValueError",
    ("recbole_attn.errors", "MetricConfigError"): "ValueError",
}


class BundleError(Exception):
    """The code cannot be bundled as it is (a name clash, a cycle through a model file)."""


@dataclass
class Unit:
    """One top-level definition: its module, the names it binds, its text's lines."""

    module: str
    names: tuple
    node: ast.stmt
    start: int  # first line (1-based), comments right above it included
    end: int
    #: [(start, end)] lines to drop (config-only class attributes, nested imports)
    dropped: list = field(default_factory=list)
    #: [(line, text)] text written in place of the dropped line ``line`` (``config_keys``)
    added: list = field(default_factory=list)
    #: [(line, byte start, byte end, text)] spans to replace (``alias.`` of module
    #: aliases by nothing, :data:`SUBSTITUTES`)
    cuts: list = field(default_factory=list)
    #: internal dependencies [(module, name)]; external local names used
    needs: set = field(default_factory=set)
    external: set = field(default_factory=set)
    analysed: bool = False

    @property
    def key(self):
        return (self.module, self.names[0])


def module_path(name):
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise BundleError(f"module {name} not found")
    return spec.origin


def is_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False


def internal(name):
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _bound_names(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        elements = target.elts if isinstance(target, ast.Tuple) else [target]
        names += [e.id for e in elements if isinstance(e, ast.Name)]
    return tuple(names)


class Module:
    """A parsed module of ours: its definitions and what its imports bind."""

    def __init__(self, name):
        self.name = name
        with open(module_path(name), encoding="utf-8") as f:
            self.source = f.read()
        self.lines = self.source.splitlines(keepends=True)
        tree = ast.parse(self.source)
        self.docstring = ast.get_docstring(tree, clean=True)
        #: local name -> ("module", dotted) | ("from", dotted, attr) | ("import", text)
        self.imports = {}
        self.units = {}
        previous_end = 0
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports.update(self._bindings(node))
            elif isinstance(
                node,
                (
                    ast.FunctionDef,
                    ast.AsyncFunctionDef,
                    ast.ClassDef,
                    ast.Assign,
                    ast.AnnAssign,
                ),
            ):
                names = _bound_names(node)
                if not names:
                    continue
                unit = Unit(name, names, node, self._start(node, previous_end), 0)
                unit.end = node.end_lineno
                for bound in names:
                    self.units[bound] = unit
            previous_end = node.end_lineno

    def _start(self, node, previous_end):
        first = min(
            [node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]
        )
        while first - 1 > previous_end and self.lines[first - 2].strip().startswith(
            "#"
        ):
            first -= 1
        return first

    def _bindings(self, node):
        out = {}
        if isinstance(node, ast.Import):
            for alias in node.names:
                if internal(alias.name):
                    raise BundleError(
                        f"{self.name}: write 'from ... import' for {alias.name}"
                    )
                local = alias.asname or alias.name.split(".")[0]
                text = f"import {alias.name}" + (
                    f" as {alias.asname}" if alias.asname else ""
                )
                out[local] = ("import", text)
            return out
        if node.level:
            raise BundleError(f"{self.name}: relative imports are not bundled")
        for alias in node.names:
            local = alias.asname or alias.name
            if internal(node.module):
                if alias.asname and alias.asname != alias.name:
                    raise BundleError(
                        f"{self.name}: 'import {alias.name} as {alias.asname}'"
                    )
                full = f"{node.module}.{alias.name}"
                out[local] = (
                    ("module", full)
                    if is_module(full)
                    else ("from", node.module, alias.name)
                )
            else:
                text = f"from {node.module} import {alias.name}"
                out[local] = (
                    "import",
                    text + (f" as {alias.asname}" if alias.asname else ""),
                )
        return out


class Bundler:
    """Collects the definitions that ``roots`` (``[(module, class name)]``) need."""

    def __init__(self):
        self.modules = {}

    def module(self, name):
        if name not in self.modules:
            self.modules[name] = Module(name)
        return self.modules[name]

    def resolve(self, module_name, name, seen=()):
        """The definition ``(module, name)`` that ``name`` means in ``module_name``, an
        external import ``("import", text)``, a module alias ``("module", dotted)``, or
        None (a builtin or a local name)."""
        module = self.module(module_name)
        if name in module.units:
            return ("unit", module.units[name].key)
        binding = module.imports.get(name)
        if binding is None or binding[0] in ("import", "module"):
            return binding
        _, source, attr = binding
        if (source, attr) in seen:
            raise BundleError(f"import cycle for {source}.{attr}")
        return self.resolve(source, attr, seen + ((source, attr),))

    def unit(self, key):
        return self.module(key[0]).units[key[1]]

    def analyse(self, unit):
        """Fill ``unit``'s dependencies, dropped lines and cuts (once)."""
        if unit.analysed:
            return
        unit.analysed = True
        module = self.module(unit.module)
        skip = set()
        local_bindings = {}
        for node in ast.walk(unit.node):
            if isinstance(node, ast.ImportFrom) and internal(node.module or ""):
                unit.dropped.append((node.lineno, node.end_lineno))
                skip.add(node)
                for alias in node.names:
                    if is_module(f"{node.module}.{alias.name}"):
                        raise BundleError(
                            f"{unit.module}: a module imported inside a function "
                            f"({node.module}.{alias.name}) is not bundled"
                        )
                    local_bindings[alias.asname or alias.name] = (
                        node.module,
                        alias.name,
                    )
        for node in _walk(unit.node, skip):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                target = self.resolve(unit.module, node.value.id)
                if target is not None and target[0] == "module":
                    found = self.resolve(target[1], node.attr)
                    if found is None:
                        raise BundleError(f"{target[1]} has no {node.attr}")
                    self._need(unit, found, f"{target[1]}.{node.attr}")
                    value = node.value
                    unit.cuts.append(
                        (value.lineno, value.col_offset, value.end_col_offset + 1, "")
                    )
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in local_bindings:
                    found = self.resolve(*local_bindings[node.id])
                else:
                    found = self.resolve(unit.module, node.id)
                if found is not None and found[0] == "unit":
                    found = ("unit", found[1])
                if found is not None and found[0] == "unit" and found[1] in SUBSTITUTES:
                    unit.cuts.append(
                        (
                            node.lineno,
                            node.col_offset,
                            node.end_col_offset,
                            SUBSTITUTES[found[1]],
                        )
                    )
                    continue
                if found is not None and found[0] == "module":
                    # a module alias used bare (not as alias.attr): cannot be bundled
                    if not _is_attribute_value(unit.node, node):
                        raise BundleError(
                            f"{unit.module}: module {node.id} used as a value"
                        )
                    continue
                self._need(unit, found, node.id)

    def _need(self, unit, found, name):
        if found is None:
            return
        if found[0] == "unit":
            if found[1] != unit.key:
                unit.needs.add(found[1])
        elif found[0] == "import":
            unit.external.add(found[1])
        else:
            raise BundleError(f"{unit.module}: cannot bundle {name}")

    def collect(self, roots):
        """Every definition that ``roots`` need (the roots included), by key."""
        todo = list(roots)
        found = {}
        while todo:
            key = todo.pop()
            if key in found:
                continue
            unit = self.unit(key)
            self.analyse(unit)
            found[key] = unit
            todo.extend(unit.needs)
        return found


def _walk(node, skip):
    """``ast.walk`` that does not enter the nodes of ``skip``."""
    todo = [node]
    while todo:
        current = todo.pop()
        if current in skip:
            continue
        yield current
        todo.extend(ast.iter_child_nodes(current))


def _is_attribute_value(root, name_node):
    for node in ast.walk(root):
        if isinstance(node, ast.Attribute) and node.value is name_node:
            return True
    return False
