"""Run a function once a module is first imported (``import recbole_attn``: RecBole)."""

import importlib.abc
import sys


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``name`` with the other finders; ``callback(module)`` once it ran."""

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

    def __getattr__(self, attr):  # the wrapped loader's get_data, ...
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
    """``callback(module)`` once module ``name`` is first imported (now if it is)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
    elif not any(
        isinstance(f, _AfterImport) and f.name == name and f.callback is callback
        for f in sys.meta_path
    ):
        sys.meta_path.insert(0, _AfterImport(name, callback))
