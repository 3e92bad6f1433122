"""The package's own imports form no circle: every import of one ``recbole_attn`` module by
another (at the top of a file or inside a function) is an edge, and the graph has no
strongly connected component of more than one module."""

import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def module_graph(root, package="recbole_attn"):
    """module -> the modules of the package it imports (a ``from pkg import sub`` names
    the submodule, a ``from pkg import name`` the package)."""
    files = {}
    for folder, _, names in os.walk(os.path.join(root, package)):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                files[dotted.removesuffix(".__init__")] = path

    def resolve(name):
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names}
                found = {s for s in subs if s in files}
                targets |= found | ({node.module} if len(found) < len(subs) else set())
        graph[module] = {
            resolve(t) for t in targets if t == package or t.startswith(package + ".")
        } - {module, None}
    return graph


def circles(graph):
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_circle():
    graph = module_graph(ROOT)
    assert len(graph) > 50 and "recbole_attn.cli" in graph
    assert "recbole_attn.options.arguments" in graph["recbole_attn.commands.recommend"]
    assert circles(graph) == []


def test_a_circle_is_found(tmp_path):
    """The check sees a circle through a function-level import and a package import."""
    pkg = tmp_path / "recbole_attn"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from recbole_attn import b\n")
    (pkg / "b.py").write_text("def f():\n    from recbole_attn.sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("import recbole_attn.a\n")
    (pkg / "d.py").write_text("from recbole_attn.a import x\n")
    assert circles(module_graph(str(tmp_path))) == [
        ["recbole_attn.a", "recbole_attn.b", "recbole_attn.sub.c"]
    ]


#: the package's folders by job, lowest first (docs/architecture.md): a module imports
#: only from its own part or a lower layer, so the folder listing is the plan
LAYERS = (
    ("errors", "model"),
    ("files",),
    ("per_user_file",),
    ("options", "evaluator"),
    ("data",),
    ("sequential",),
    ("plugin",),
    ("engine",),
    ("host", "upstream"),
    ("commands",),
    ("cli",),
    ("__main__", ""),
)


def _part(module):
    return module.split(".")[1] if "." in module else ""


def test_every_import_runs_down_the_layers():
    layer = {part: i for i, parts in enumerate(LAYERS) for part in parts}
    graph = module_graph(ROOT)
    assert set(map(_part, graph)) == set(layer), "a folder is missing from LAYERS"
    upward = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        for b in targets
        if _part(a) != _part(b) and layer[_part(b)] >= layer[_part(a)]
    )
    assert not upward, upward
