"""TLS: a daemon's tcp: listener with TLS and client certificates, reached through
``connect(tls=...)``; clients without the right credentials are refused."""

import os
import subprocess

import grpc
import numpy
import pytest

import gpucmd
from conftest import Daemon


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 and two client certificates (CN=client,
    and CN=operator, an administrator), as PEM files."""
    directory = str(tmp_path_factory.mktemp("tls"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
                            ("client", "extendedKeyUsage=clientAuth"),
                            ("operator", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=directory)
        with open(os.path.join(directory, f"{name}.ext"), "w") as file:
            file.write(extension + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext",
                "-out", f"{name}.pem", cwd=directory)
    return directory


@pytest.fixture(scope="module")
def tls_daemon(certificates):
    path = lambda name: os.path.join(certificates, name)  # noqa: E731
    running = Daemon(config=f'tls {{ cert_file: "{path("server.pem")}" '
                            f'key_file: "{path("server.key")}" '
                            f'client_ca_file: "{path("ca.pem")}" }}\n'
                            'admin { client_subjects: "CN=operator" }\n',
                     listen=["tcp:127.0.0.1:0"])
    yield running
    problem = running.stop()
    assert not problem, problem


def read(certificates, name):
    with open(os.path.join(certificates, name), "rb") as file:
        return file.read()


def credentials_of(certificates, name):
    return grpc.ssl_channel_credentials(
        root_certificates=read(certificates, "ca.pem"),
        private_key=read(certificates, f"{name}.key"),
        certificate_chain=read(certificates, f"{name}.pem"))


def test_a_client_certificate_reaches_the_daemon_over_tls(tls_daemon, certificates):
    tcp_target = next(t for t in tls_daemon.targets if t.startswith("tcp:"))
    credentials = credentials_of(certificates, "client")
    with gpucmd.connect(tcp_target, tls=credentials, timeout=30) as client:
        assert client.devices()[0].driver == "cpu"
        with client.session(name="over-tls") as session:
            host = numpy.arange(300_000, dtype=numpy.int32)  # inline: no shared memory on tcp
            numpy.testing.assert_array_equal(session.asarray(host).get(), host)


def test_clients_without_the_right_credentials_are_refused(tls_daemon, certificates):
    tcp_target = next(t for t in tls_daemon.targets if t.startswith("tcp:"))
    without_certificate = grpc.ssl_channel_credentials(
        root_certificates=read(certificates, "ca.pem"))
    for tls in (without_certificate, None):
        with pytest.raises(gpucmd.Unavailable):
            gpucmd.connect(tcp_target, tls=tls, wait_ready=2).devices()


def test_certificate_subjects_own_sessions_and_configured_ones_administer(tls_daemon,
                                                                          certificates):
    tcp_target = next(t for t in tls_daemon.targets if t.startswith("tcp:"))
    with gpucmd.connect(tcp_target, tls=credentials_of(certificates, "client"),
                        timeout=30) as client, \
            gpucmd.connect(tcp_target, tls=credentials_of(certificates, "operator"),
                           timeout=30) as operator, \
            client.session(name="client-work"), operator.session(name="operator-work"):
        own = client.sessions()
        assert own.caller == "x509:CN=client" and not own.all_clients
        assert [(s.client_name, s.owner) for s in own.sessions] == [
            ("client-work", "x509:CN=client")]
        every = operator.sessions()
        assert every.caller == "x509:CN=operator" and every.all_clients
        assert sorted(s.client_name for s in every.sessions) == ["client-work", "operator-work"]
