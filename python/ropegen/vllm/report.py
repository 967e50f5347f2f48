"""ROPEGEN_VLLM_REPORT=FILE: evidence of what ran, as JSON lines appended to FILE.

Every process that builds RoPE layers (vLLM's engine core and workers) appends
one line per layer instance when it is built,
    {"pid", "layer": vLLM class name, "kernel": "computing" | "table" | "vllm", "spec": hash or null, "reason": text or null}
and one line {"pid", "layer", "first_call": true} the first time a layer of
each class runs a rope-gen kernel (per process and report file). Each line is one write(2) on a file opened
with O_APPEND, so lines of concurrent processes never interleave. The file is
created if missing, never truncated.
"""
import json
import logging
import os
import threading

_log = logging.getLogger("vllm.ropegen")
_lock = threading.Lock()
_first_calls = set()
_failed = False


def _append(record):
    global _failed
    path = os.environ.get("ROPEGEN_VLLM_REPORT")
    if not path or _failed:
        return
    line = (json.dumps(dict(pid=os.getpid(), **record)) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError as e:  # serving goes on; the user hears once
        _failed = True
        _log.error("ROPEGEN_VLLM_REPORT=%s: cannot append to it (%s); no report lines from process %d",
                   path, e.strerror, os.getpid())


def built(layer, kernel, spec_hash=None, reason=None):
    _append({"layer": layer, "kernel": kernel, "spec": spec_hash, "reason": reason})


def first_call(layer):
    """Once per class, process and report file; cheap after the first (a set lookup)."""
    key = (layer, os.environ.get("ROPEGEN_VLLM_REPORT"))
    if key in _first_calls:
        return
    with _lock:
        if key in _first_calls:
            return
        _first_calls.add(key)
    _append({"layer": layer, "first_call": True})
