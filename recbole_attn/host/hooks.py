"""
recbole_attn.host.hooks
#######################

Run a function right after a module is imported, by whoever imports it first (an import
hook on ``sys.meta_path``), or at once if it is imported already. ``import recbole_attn``
uses it to change RecBole (:mod:`recbole_attn.host.install`) only when RecBole is imported, so
that the package itself imports neither RecBole nor torch: ``recbole-attn --help`` and
argument errors answer at once.
"""

import importlib.abc
import sys


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``name`` with the other finders and runs ``callback(module)`` once the
    module has executed."""

    def __init__(self, name, callback):
        self.name = name
        self.callback = callback
        self.loader = None

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                self.loader = spec.loader
                spec.loader = self
                return spec
        return None

    def __getattr__(
        self, attr
    ):  # the wrapped loader's get_data, get_resource_reader...
        loader = self.__dict__.get("loader")
        if loader is None:
            raise AttributeError(attr)
        return getattr(loader, attr)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        self.callback(module)


def after_import(name, callback):
    """``callback(module)`` right after the module ``name`` is first imported, or now if
    it is imported already."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    elif not any(
        isinstance(f, _AfterImport) and f.name == name and f.callback is callback
        for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _AfterImport(name, callback))
