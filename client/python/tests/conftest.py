"""pytest fixtures: the real gpucmdd binary, started on a socket of a temporary directory.

The daemon is the one Bazel built for the test or benchmark (``server/gpucmdd`` in the
runfiles), or ``$GPUCMDD_BINARY`` when they run outside Bazel.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator, List, Optional, Sequence

import pytest

import gpucmd

#: Seconds a session whose lease broke outlives it in the test daemons.
LEASE_GRACE_SECONDS = 1
#: Seconds an idle session without a lease lives in the test daemons.
IDLE_TIMEOUT_SECONDS = 2


def daemon_binary() -> str:
    if "GPUCMDD_BINARY" in os.environ:
        return os.environ["GPUCMDD_BINARY"]
    # This file is client/python/tests/conftest.py of the workspace in the runfiles.
    workspace = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
    return os.path.join(workspace, "server", "gpucmdd")


class Daemon:
    """A gpucmdd child process serving on ``target`` until :meth:`stop`."""

    def __init__(self, config: str = "", listen: Sequence[str] = (),
                 idle_timeout_seconds: int = IDLE_TIMEOUT_SECONDS, cpu: str = "",
                 limits: str = "") -> None:
        """`config` is appended to the configuration; `cpu` and `limits` hold more fields
        of its `cpu` and `limits` blocks (e.g. ``kernel_timeout_seconds: 2``)."""
        self.directory = tempfile.mkdtemp(prefix="gpucmd-py-", dir="/tmp")
        socket_path = os.path.join(self.directory, "gpucmdd.sock")
        config_path = os.path.join(self.directory, "gpucmdd.textproto")
        with open(config_path, "w") as file:
            file.write(f'compile {{ cache_dir: "{self.directory}/cache" }}\n'
                       f"limits {{ session_lease_grace_seconds: {LEASE_GRACE_SECONDS}"
                       f" session_idle_timeout_seconds: {idle_timeout_seconds} {limits} }}\n"
                       "cpu { memory_bytes_per_device: 1073741824 executor_workers: 2 "
                       f"{cpu} }}\n"
                       + config)
        self.process = subprocess.Popen(
            [daemon_binary(), f"--listen=unix:{socket_path}", "--http_listen=127.0.0.1:0",
             f"--config={config_path}"] + [f"--listen={address}" for address in listen],
            stdout=subprocess.PIPE, stderr=open(os.path.join(self.directory, "stderr"), "w"))
        #: Every gRPC address of the ready line; `target` is the Unix socket.
        self.targets = self._wait_ready(timeout=30)
        self.target = self.targets[0]

    def _wait_ready(self, timeout: float) -> List[str]:
        deadline = time.monotonic() + timeout
        line = b""
        while time.monotonic() < deadline and not line.endswith(b"\n"):
            ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
            if ready:
                data = os.read(self.process.stdout.fileno(), 4096)
                if not data:
                    break
                line += data
        if not line.startswith(b"gpucmdd ready"):
            stderr = self.stderr()
            self.stop()
            raise RuntimeError(f"gpucmdd did not start: {line!r}, stderr: {stderr}")
        line = line.split(b"\n")[0]
        fields = dict(field.split("=", 1) for field in line.decode().split()[2:])
        return fields["grpc"].split(",")

    def stderr(self) -> str:
        with open(os.path.join(self.directory, "stderr")) as file:
            return file.read()

    def stop(self) -> str:
        """Stops the daemon (SIGTERM: it drains); returns "" when it exited cleanly, else
        what went wrong with its standard error (a sanitizer's report, say)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        problem = ""
        if self.process.returncode != 0:
            problem = f"gpucmdd exited with {self.process.returncode}: {self.stderr()[-4000:]}"
        shutil.rmtree(self.directory, ignore_errors=True)
        return problem


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the tests of a module."""
    running = Daemon()
    yield running
    problem = running.stop()
    assert not problem, problem


@pytest.fixture
def client(daemon: Daemon) -> Iterator[gpucmd.Client]:
    with gpucmd.connect(daemon.target, timeout=60) as connected:
        yield connected


@pytest.fixture
def session(client: gpucmd.Client, request) -> Iterator[gpucmd.Session]:
    with client.session(name=request.node.name[:200]) as opened:
        yield opened


def wait_for(condition, timeout: float = 20.0) -> Optional[bool]:
    """Polls ``condition`` until it is true or ``timeout`` passed; returns its last value."""
    deadline = time.monotonic() + timeout
    value = condition()
    while not value and time.monotonic() < deadline:
        time.sleep(0.05)
        value = condition()
    return value
