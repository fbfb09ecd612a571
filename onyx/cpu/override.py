"""`CallOverride`: switching one module instance to another `__call__`, parameters untouched.

The CPU speed-ups of `onyx.cpu.exp` (a vectorised SwiGLU) and `onyx.cpu.overlap` (layers that
start their own evaluation) change what a loaded model's modules do without rebuilding them:
the module's class becomes a subclass of its own class whose only difference is `__call__`
(one subclass per original class, made once). The parameters stay where mlx-lm put them, and
the original class is the subclass's base, so the switch can be undone by assigning it back.
"""

from __future__ import annotations

from typing import Callable


class CallOverride:
    """One replacement `__call__` and the subclasses made for it."""

    def __init__(self, call: Callable) -> None:
        self.call = call
        self._classes: dict[type, type] = {}

    def switch(self, module) -> None:
        """Makes `module` use this `__call__` (no change if it already does)."""
        if not self.applies_to(module):
            cls = type(module)
            sub = self._classes.get(cls)
            if sub is None:
                sub = self._classes[cls] = type(cls.__name__, (cls,), {"__call__": self.call,
                                                                      "__module__": cls.__module__})
            module.__class__ = sub

    def applies_to(self, module) -> bool:
        """Whether `switch` switched this module."""
        return type(module) in self._classes.values()
