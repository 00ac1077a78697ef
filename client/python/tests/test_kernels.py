"""Kernels through the daemon: results against numpy, every scalar type, argument checks
before anything is sent, access modes, streams, printf, compile errors."""

import numpy
import pytest

import gpucmd
from gpucmd.v1 import gpucmd_pb2 as pb

SAXPY = r"""
extern "C" __global__ void saxpy(int n, float a, const float* x, float* y) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    y[i] = a * x[i] + y[i];
}
"""

MATMUL = r"""
extern "C" __global__ void matmul(const double* a, const double* b, double* c, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, column = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n || column >= n) return;
  double sum = 0;
  for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + column];
  c[row * n + column] = sum;
}
"""

SCALARS = r"""
extern "C" __global__ void scalars(int i32, unsigned u32, long long i64, unsigned long long u64,
                                   float f32, double f64, long long* ints,
                                   unsigned long long* unsigned_ints, double* floats) {
  ints[0] = i32; ints[1] = i64;
  unsigned_ints[0] = u32; unsigned_ints[1] = u64;
  floats[0] = f32; floats[1] = f64;
}
"""


def test_saxpy_matches_numpy(session):
    n = 100_003
    x = numpy.random.default_rng(0).standard_normal(n, dtype=numpy.float32)
    y = numpy.random.default_rng(1).standard_normal(n, dtype=numpy.float32)
    device_x, device_y = session.asarray(x), session.asarray(y)
    saxpy = session.compile(SAXPY, "saxpy")
    saxpy(64, 256, (n, 2.5, device_x, device_y))
    numpy.testing.assert_allclose(device_y.get(), 2.5 * x + y, rtol=1e-6)


def test_two_dimensional_launch_matches_numpy(session):
    n = 37
    a = numpy.random.default_rng(2).standard_normal((n, n))
    b = numpy.random.default_rng(3).standard_normal((n, n))
    c = session.empty((n, n), numpy.float64)
    matmul = gpucmd.RawKernel(MATMUL, "matmul")
    matmul(((n + 7) // 8, (n + 7) // 8), (8, 8), (session.asarray(a), session.asarray(b), c, n))
    numpy.testing.assert_allclose(c.get(), a @ b, rtol=1e-12)


def test_every_scalar_type_reaches_the_kernel(session):
    kernel = session.compile(SCALARS, "scalars")
    assert [p.scalar_type for p in kernel.params[:6]] == [
        pb.SCALAR_TYPE_I32, pb.SCALAR_TYPE_U32, pb.SCALAR_TYPE_I64, pb.SCALAR_TYPE_U64,
        pb.SCALAR_TYPE_F32, pb.SCALAR_TYPE_F64]
    ints = session.zeros(2, numpy.int64)
    unsigned_ints = session.zeros(2, numpy.uint64)
    floats = session.zeros(2, numpy.float64)
    kernel(1, 1, (-2**31, 2**32 - 1, -2**63, 2**64 - 1, 1.5, numpy.float64(-2.25),
                  ints, unsigned_ints, floats))
    assert ints.get().tolist() == [-2**31, -2**63]
    assert unsigned_ints.get().tolist() == [2**32 - 1, 2**64 - 1]
    assert floats.get().tolist() == [1.5, -2.25]
    # numpy scalars that convert safely, and Python ints for float parameters.
    kernel(1, 1, (numpy.int16(-5), numpy.uint8(7), numpy.int32(-9), numpy.uint32(11),
                  numpy.float32(0.5), 3, ints, unsigned_ints, floats))
    assert ints.get().tolist() == [-5, -9]
    assert unsigned_ints.get().tolist() == [7, 11]
    assert floats.get().tolist() == [0.5, 3.0]


@pytest.mark.parametrize("index, value, error, message", [
    (0, 2**31, ValueError, "range"),
    (0, -2**31 - 1, ValueError, "range"),
    (1, -1, ValueError, "range"),
    (1, 2**32, ValueError, "range"),
    (2, 2**63, ValueError, "range"),
    (3, -1, ValueError, "range"),
    (3, 2**64, ValueError, "range"),
    (0, 1.5, TypeError, "takes an int"),
    (0, "1", TypeError, "takes an int"),
    (2, numpy.float32(1), TypeError, "convert safely"),
    (0, numpy.int64(1), TypeError, "convert safely"),
    (3, numpy.int8(1), TypeError, "convert safely"),
    (4, "x", TypeError, "takes a float"),
    (4, numpy.float64(1), TypeError, "convert safely"),
    (4, 1e39, ValueError, "float32's range"),
    (5, 1j, TypeError, "takes a float"),
    (6, numpy.zeros(2, numpy.int64), TypeError, "session.asarray"),
    (6, 5, TypeError, "DeviceArray"),
], ids=lambda value: repr(value)[:20])
def test_mismatched_arguments_raise_before_anything_is_sent(session, index, value, error, message):
    kernel = session.compile(SCALARS, "scalars")
    ints = session.asarray(numpy.array([41, 42], numpy.int64))
    unsigned_ints = session.zeros(2, numpy.uint64)
    floats = session.zeros(2, numpy.float64)
    args = [1, 2, 3, 4, 5.0, 6.0, ints, unsigned_ints, floats]
    args[index] = value
    with pytest.raises(error, match=message):
        kernel(1, 1, args)
    session.synchronize()
    assert ints.get().tolist() == [41, 42], "nothing ran"


def test_wrong_argument_counts_grids_and_blocks_raise(session):
    kernel = session.compile(SAXPY, "saxpy")
    x, y = session.zeros(4, numpy.float32), session.zeros(4, numpy.float32)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        kernel(1, 4, (4, 1.0, x))
    with pytest.raises(TypeError, match="tuple or list"):
        kernel(1, 4, x)
    for grid, error in [((), TypeError), ((1, 1, 1, 1), TypeError), (-1, ValueError),
                        (2**32, ValueError), (1.0, TypeError), ((1, True), TypeError)]:
        with pytest.raises(error):
            kernel(grid, 4, (4, 1.0, x, y))
        with pytest.raises(error):
            kernel(1, grid, (4, 1.0, x, y))
    other_session = session.client.session(name="other")
    with pytest.raises(ValueError, match="another session"):
        kernel(1, 4, (4, 1.0, other_session.zeros(4, numpy.float32), y))
    other_session.close()
    with pytest.raises(ValueError, match="rows apart"):
        session.compile(r'extern "C" __global__ void k(float* p) {}', "k")(
            1, 1, (session.zeros((4, 4), numpy.float32)[0:2, 0:2],))


def test_access_follows_const_or_is_given(session):
    kernel = session.compile(SAXPY, "saxpy")
    assert [p.read_only for p in kernel.params] == [False, False, True, False]
    x, y = session.zeros(4, numpy.float32), session.zeros(4, numpy.float32)
    inferred = kernel.launch_request(1, 4, (4, 1.0, x, y))
    assert [a.buffer.access for a in inferred.args[2:]] == [pb.ACCESS_READ, pb.ACCESS_READ_WRITE]
    given = kernel.launch_request(1, 4, (4, 1.0, gpucmd.InOut(x), gpucmd.Out(y)))
    assert [a.buffer.access for a in given.args[2:]] == [pb.ACCESS_READ_WRITE, pb.ACCESS_WRITE]
    x.set(numpy.ones(4, numpy.float32))
    kernel(1, 4, (4, 3.0, gpucmd.In(x), gpucmd.Out(y)))
    assert y.get().tolist() == [3.0] * 4
    with pytest.raises(TypeError):
        gpucmd.In(numpy.zeros(4))


def test_slices_pass_their_offset(session):
    kernel = session.compile(SAXPY, "saxpy")
    x = session.asarray(numpy.arange(8, dtype=numpy.float32))
    y = session.zeros(8, numpy.float32)
    kernel(1, 4, (4, 1.0, x[4:8], y[2:6]))
    assert y.get().tolist() == [0, 0, 4, 5, 6, 7, 0, 0]


def test_raw_kernels_compile_once_per_session(client):
    raw = gpucmd.RawKernel(SAXPY, "saxpy", options=("-DUNUSED=1",))
    with pytest.raises(ValueError, match="no session"):
        raw(1, 1, (1, 1.0, 2, 3))
    with client.session(name="first") as first, client.session(name="second") as second:
        for session in (first, second):
            x, y = session.asarray(numpy.ones(3, numpy.float32)), session.zeros(3, numpy.float32)
            raw(1, 3, (3, 2.0, x, y))
            raw(1, 3, (3, 2.0, x, y))
            assert y.get().tolist() == [4.0] * 3
        assert raw.compile(first) is raw.compile(first)
        assert raw.compile(first) is not raw.compile(second)
        assert raw.compile(second).cache_hit, "the daemon's cache served the second session"
        assert "saxpy(int n, float a" in repr(raw.compile(first)) and "first" in repr(raw.compile(first))
    bound = gpucmd.RawKernel(r'extern "C" __global__ void nothing() {}', "nothing", session=None)
    with client.session(name="bound") as session:
        bound.session = session
        bound(1, 1, ())
    assert "saxpy" in repr(raw) and "UNUSED" in repr(raw)


def test_streams_and_kernel_output(session):
    printing = session.compile(r"""
        extern "C" __global__ void hello(int value) { printf("value %d\n", value); }""", "hello")
    stream = session.stream(3)
    printing(1, 1, (7,), stream=stream)
    assert "value 7" in stream.synchronize()
    printing(1, 2, (8,))
    assert session.synchronize().count("value 8") == 2
    with pytest.raises(ValueError):
        session.stream(-1)
    with pytest.raises(TypeError):
        printing(1, 1, (1,), stream="one")


def test_compile_errors_carry_the_whole_log(session):
    lines = "\n".join(f"  undeclared_{i} = {i};" for i in range(60))
    source = f'extern "C" __global__ void broken(int* out) {{\n{lines}\n}}\n'
    with pytest.raises(gpucmd.CompileError) as raised:
        session.compile(source, "broken")
    error = raised.value
    assert isinstance(error, gpucmd.InvalidArgument)
    assert error.kernel_id and "undeclared_59" in error.log
    assert len(error.log) > len(error.message)
    with pytest.raises(gpucmd.InvalidArgument):
        session.compile(SAXPY, "no_such_entry")
