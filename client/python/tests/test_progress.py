"""The progress bar of long transfers: drawn through tqdm (an optional dependency,
replaced here by a recording double) on a terminal, never elsewhere."""

import sys
import types

import numpy
import pytest

from gpucmd import _progress


class RecordingBar:
    """Stands in for tqdm.tqdm: records what a transfer reports."""

    made = []

    def __init__(self, total, initial, **options):
        self.total, self.count, self.closed = total, initial, False
        RecordingBar.made.append(self)

    def update(self, nbytes):
        self.count += nbytes

    def close(self):
        self.closed = True


@pytest.fixture
def terminal(monkeypatch):
    """A terminal on standard error, tqdm installed, and bars shown at once."""
    monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=RecordingBar))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(_progress, "SHOW_AFTER_SECONDS", 0.0)
    RecordingBar.made.clear()


def test_a_long_inline_transfer_draws_a_bar_that_reaches_its_total(session, terminal):
    host = numpy.arange(10 << 20, dtype=numpy.int32)  # 40 MiB: several chunks each way
    device = session.empty(host.shape, host.dtype)
    device.set(host, shared_memory=False)
    numpy.testing.assert_array_equal(device.get(shared_memory=False), host)
    assert len(RecordingBar.made) == 2  # the write, then the read
    for bar in RecordingBar.made:
        assert bar.total == host.nbytes and bar.count == host.nbytes and bar.closed


def test_no_bar_off_a_terminal_or_when_turned_off(session, terminal, monkeypatch):
    monkeypatch.setenv("GPUCMD_PROGRESS", "0")
    session.asarray(numpy.zeros(5 << 20, numpy.uint8)).get(shared_memory=False)
    monkeypatch.delenv("GPUCMD_PROGRESS")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    session.asarray(numpy.zeros(5 << 20, numpy.uint8)).get(shared_memory=False)
    assert RecordingBar.made == []
