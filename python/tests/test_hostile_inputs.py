"""What the binding must refuse by name, or run right: arguments that are not
tensors, wrong dtypes, big-endian and read-only arrays, overlapping outputs,
empty tensors on every encoding, strides past 32 bits (views over sparse
memory, canaries around the outputs), and fork() while a thread runs kernels."""
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import ropegen

ROPE = {"name": "hostile", "head_dim": 8}


@pytest.fixture(scope="module")
def rope():
    return ropegen.compile(ROPE)


def q_of(shape=(1, 3, 2, 8), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("value, says", [
    ([[1.0] * 8], "q must be a numpy array or a torch CPU tensor, not list"),
    (None, "q is None: pass a numpy array or a torch CPU tensor"),
    (object(), "q must be a numpy array or a torch CPU tensor, not object"),
    ("q", "q must be a numpy array or a torch CPU tensor, not str"),
])
def test_not_a_tensor_is_a_type_error_naming_the_argument(rope, value, says):
    with pytest.raises(TypeError, match=says):
        rope(value)


def test_other_arguments_are_named(rope):
    q = q_of()
    with pytest.raises(TypeError, match="out_q must be a numpy array or a torch CPU tensor, not list"):
        rope(q, out_q=[0.0])
    with pytest.raises(TypeError, match="k must be a numpy array or a torch CPU tensor, not tuple"):
        rope(q, (1, 2))
    with pytest.raises(TypeError, match="offset must be an integer, not float"):
        rope(q, offset=1.5)
    with pytest.raises(ValueError, match=r"offset \(36893488147419103232\) is not a 64-bit integer"):
        rope(q, offset=2**65)
    with pytest.raises(ValueError, match=r"position \(offset \+ index\) -1 is negative: positions must be in 0..2\^32"):
        rope(q, offset=np.int64(-1))
    assert np.array_equal(rope(q, offset=np.int32(2)), rope(q, offset=2))


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.bool_])
def test_wrong_dtype_names_it_and_the_spec_dtype(rope, dtype):
    with pytest.raises(ValueError, match=r"q has dtype \w+ but the spec's dtype is f32: pass float32"):
        rope(q_of().astype(dtype))


def test_big_endian_is_refused_not_converted(rope):
    with pytest.raises(ValueError, match=r"q is big-endian \(dtype >f4\): pass it in native byte order"):
        rope(q_of().astype(">f4"))
    with pytest.raises(ValueError, match="out_q is big-endian"):
        rope(q_of(), out_q=np.zeros((1, 3, 2, 8), ">f4"))


def test_read_only_inputs_run(rope, tmp_path):
    q = q_of()
    want = rope(q)
    frozen = q.copy()
    frozen.flags.writeable = False
    assert np.array_equal(rope(frozen), want)
    path = tmp_path / "q.f32"
    q.tofile(path)
    assert np.array_equal(rope(np.memmap(path, np.float32, "r", shape=q.shape)), want)
    row = q[:, :1]
    broadcast = np.broadcast_to(row, q.shape)  # read-only, stride 0 over tokens
    got = rope(broadcast)
    assert np.array_equal(got, rope(np.ascontiguousarray(broadcast)))


def test_read_only_outputs_are_refused(rope):
    frozen = q_of()
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out_q is read-only: an output must be writable"):
        rope(frozen, out_q=frozen)  # in place on a read-only array
    with pytest.raises(ValueError, match="out_q is read-only"):
        rope(q_of(), out_q=np.broadcast_to(np.zeros((1, 1, 2, 8), np.float32), (1, 3, 2, 8)))


def test_overlapping_outputs_are_refused(rope):
    memory = np.zeros((1, 4, 2, 8), np.float32)
    memory[:] = q_of((1, 4, 2, 8))
    before = memory.copy()
    with pytest.raises(ValueError, match="out_q overlaps q in memory"):
        rope(memory[:, :3], out_q=memory[:, 1:])
    q = memory[:, :3]
    with pytest.raises(ValueError, match="out_q overlaps k in memory"):
        rope(q, memory[:, 1:], out_q=q, out_k=memory[:, 1:])  # in place, k inside q's memory
    with pytest.raises(ValueError, match="out_q overlaps out_k in memory"):
        rope(q_of(), q_of(seed=1), out_q=memory[:, :3], out_k=memory[:, 1:])
    assert np.array_equal(memory, before), "a refused call wrote nothing"
    with pytest.raises(ValueError, match="out_q's elements overlap each other"):
        rope(q_of(), out_q=as_strided(np.zeros(64, np.float32), (1, 3, 2, 8), (0, 32, 32, 4)))


def test_outputs_may_have_strides_of_their_own(rope):
    q = q_of()
    out = np.full((1, 2, 3, 8), 9.0, np.float32).transpose(0, 2, 1, 3)  # shaped as q, tokens and heads swapped in memory
    rope(q, out_q=out)
    assert np.array_equal(out, rope(q))
    reversed_q = q[:, ::-1]  # negative token stride
    assert np.array_equal(rope(reversed_q, positions=None), rope(np.ascontiguousarray(reversed_q)))


def test_in_place_and_fused_qkv_in_place_run(rope):
    fused = q_of((1, 3, 4, 8))  # heads 0..1 q, 2..3 k
    q, k = fused[:, :, :2], fused[:, :, 2:]
    want_q, want_k = rope(q.copy(), k.copy())
    rope(q, k, out_q=q, out_k=k)
    assert np.array_equal(fused[:, :, :2], want_q) and np.array_equal(fused[:, :, 2:], want_k)


def empty_cases():
    alibi = {"name": "a", "encoding": "alibi", "num_heads": 2}
    sinusoidal = {"name": "s", "encoding": "sinusoidal", "dim": 6}
    learned = {"name": "l", "encoding": "learned", "dim": 6}
    runtime = {"name": "r", "head_dim": 8, "frequency": {"scheme": "runtime"}}
    f32 = np.float32
    return [
        ("rope S=0", ROPE, np.zeros((2, 0, 3, 8), f32), {}),
        ("rope H=0", ROPE, np.zeros((2, 4, 0, 8), f32), {}),
        ("rope B=0", ROPE, np.zeros((0, 4, 3, 8), f32), {}),
        ("rope thd T=0", dict(ROPE, layout="thd"), np.zeros((0, 3, 8), f32), {}),
        ("rope bhsd S=0 with k", dict(ROPE, layout="bhsd"), np.zeros((1, 4, 0, 8), f32), {"k": np.zeros((1, 2, 0, 8), f32)}),
        ("explicit ids", dict(ROPE, positions="explicit"), np.zeros((2, 0, 3, 8), f32),
         {"positions": np.zeros((2, 0), np.int64)}),
        ("sinusoidal", sinusoidal, np.zeros((0, 5, 6), f32), {}),
        ("learned", learned, np.zeros((2, 0, 6), f32),
         {"positions": np.zeros((2, 0), np.int64), "table": np.ones((4, 6), f32)}),
        ("alibi Sq=0", alibi, np.zeros((1, 2, 0, 3), f32), {}),
        ("alibi Sk=0", alibi, np.zeros((1, 2, 3, 0), f32), {}),
        ("runtime freqs", runtime, np.zeros((1, 0, 2, 8), f32), {"freqs": np.ones(4, f32)}),
    ]


@pytest.mark.parametrize("label, spec, x, kwargs", empty_cases(), ids=[c[0] for c in empty_cases()])
def test_empty_tensors_are_a_no_op_on_every_encoding(label, spec, x, kwargs):
    got = ropegen.compile(spec)(x, **kwargs)
    got = got if isinstance(got, tuple) else (got,)
    assert got[0].shape == x.shape and got[0].dtype == x.dtype
    if "k" in kwargs:
        assert got[1].shape == kwargs["k"].shape


def test_k_without_heads_beside_a_q_runs_q(rope):
    q = q_of()
    for kernel in (rope, ropegen.compile({"name": "partial", "head_dim": 8, "rotary_dim": 4})):
        out_q, out_k = kernel(q, np.zeros((1, 3, 0, 8), np.float32))
        assert out_k.shape == (1, 3, 0, 8) and np.array_equal(out_q, kernel(q))


def test_empty_backward_zeroes_d_freqs():
    kernel = ropegen.compile({"name": "r", "head_dim": 8, "frequency": {"scheme": "runtime"}})
    g = np.zeros((1, 0, 2, 8), np.float32)
    dq, d_freqs = kernel.backward(g, freqs=np.ones(4, np.float32), saved_q=g)
    assert dq.shape == g.shape and np.array_equal(d_freqs, np.zeros(4, np.float32))


MIB = 1 << 20
MAP_NORESERVE = 0x4000  # Linux; not in Python's mmap module


def sparse(nbytes):
    """Address space without memory: pages appear when touched."""
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE)


@pytest.mark.parametrize("batch_stride", [(1 << 32) - (1 << 20), 1 << 32], ids=["2^32-2^20", "2^32"])
def test_batch_strides_past_32_bits_run_right(batch_stride):
    """Truncated to 32 bits, 2^32-2^20 wrote 2 MiB before the output and 2^32 never wrote batch 1."""
    rope = ropegen.compile({"name": "wide", "head_dim": 128, "dtype": "f16"})
    memory = sparse(batch_stride * 2 + 16 * MIB)
    halves = np.frombuffer(memory, np.float16)
    view = lambda first: as_strided(halves[first:], (2, 1, 1, 128), (batch_stride * 2, 256, 256, 2))
    q, out = view(2 * MIB), view(4 * MIB)  # element offsets: 4 MiB and 8 MiB into the mapping
    dense = q_of((2, 1, 1, 128)).astype(np.float16)
    q[:] = dense
    canary = np.float16(-7.5)
    for b in range(2):
        row = 4 * MIB + b * batch_stride
        halves[row - 2 * MIB + 128:row] = canary  # up to q's row (2 MiB of halves before)
        halves[row + 128:row + 2 * MIB] = canary
    want = rope(dense)
    rope(q, out_q=out)
    assert np.array_equal(out, want)
    for b in range(2):
        row = 4 * MIB + b * batch_stride
        assert (halves[row - 2 * MIB + 128:row] == canary).all(), f"written before batch {b}"
        assert (halves[row + 128:row + 2 * MIB] == canary).all(), f"written after batch {b}"
    rope(q, out_q=q)
    assert np.array_equal(q, want)


def test_heads_further_apart_than_a_kernel_addresses_are_refused():
    rope = ropegen.compile({"name": "wide", "head_dim": 128, "dtype": "f16"})
    memory = sparse((1 << 32) + MIB)
    halves = np.frombuffer(memory, np.float16)
    q = as_strided(halves, (1, 1, 2, 128), (256, 256, 1 << 32, 2))  # heads 2^31 elements apart
    with pytest.raises(ValueError, match=r"one token of q \(2 heads, 2147483648 elements apart\) spans more than the "
                                         r"2\^31-1 elements a kernel call can address"):
        rope(q)


FORK_SCRIPT = textwrap.dedent("""
    import os, signal, threading
    import numpy as np
    import ropegen
    rope = ropegen.compile({"name": "forked", "head_dim": 64})
    q = np.random.default_rng(0).standard_normal((4, 256, 8, 64)).astype(np.float32)
    want = rope(q)
    stop = False
    def busy():
        while not stop:
            rope(q)
    runner = threading.Thread(target=busy)
    runner.start()
    failed = 0
    for i in range(20):
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child dies instead of hanging the test
            os._exit(0 if np.array_equal(rope(q), want) else 3)
        _, status = os.waitpid(pid, 0)
        failed += status != 0
    stop = True
    runner.join()
    print("failed children:", failed)
""")


@pytest.mark.parametrize("cache", ["jit", "disk"])
def test_fork_while_a_thread_runs_kernels(cache, tmp_path):
    env = dict(os.environ)
    # An unusable cache directory: kernels are JIT kernels in memory, where fork() used to hang the child.
    env["ROPEGEN_CACHE_DIR"] = "/proc/ropegen-no-cache" if cache == "jit" else env.get("ROPEGEN_CACHE_DIR", str(tmp_path))
    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failed children: 0"
