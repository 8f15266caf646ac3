"""A Cloud Storage emulator on loopback that TensorFlow's own gs:// client talks to.

TensorFlow's GCS filesystem has its endpoint compiled in (https://www.googleapis.com/storage/v1/,
https://storage.googleapis.com; it reads no STORAGE_EMULATOR_HOST nor CLOUD_STORAGE_TESTBENCH),
but its libcurl honours `https_proxy`/`http_proxy` and `CURL_CA_BUNDLE`, and it takes a token
from GOOGLE_AUTH_TOKEN_FOR_TESTING. So: gcp-storage-emulator serves the JSON API on
127.0.0.1; a proxy on 127.0.0.1 answers CONNECT for those hosts with a certificate of a CA
made for the test (openssl), and hands the decrypted requests to the emulator (plain proxy
requests too, their chunked bodies decoded: the emulator would store the chunk framing), and
an empty upload (a "directory" object) is given an empty body (the emulator fails on none);
the proxy answers `Expect: 100-continue` itself (the emulator does not, and libcurl then waits
a second before each upload's body: 28 of the test's 44 seconds in TensorFlow's process).
Nothing leaves the machine: `start` sets the environment of this process, which must not
have imported TensorFlow yet (its GCS filesystem reads its retry settings when loaded).

    with gcs_emulator.start(directory, bucket="trial"):
        import tensorflow as tf
        tf.io.gfile.exists("gs://trial/x")
"""

import contextlib
import os
import shutil
import socket
import ssl
import subprocess
import threading


def _certificates(directory):
    """A CA and a certificate for the Google storage hosts signed by it: (ca, cert, key)."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
        "-subj", "/CN=albert_tf test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "host.key", "-out", "host.csr",
        "-subj", "/CN=www.googleapis.com")
    with open(os.path.join(directory, "ext.cnf"), "w") as f:
        f.write("subjectAltName=DNS:www.googleapis.com,DNS:storage.googleapis.com\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "host.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "host.pem", "-days", "1", "-extfile", "ext.cnf")
    return [os.path.join(directory, n) for n in ("ca.pem", "host.pem", "host.key")]


def _pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def _recv_until(sock, buffer, marker):
    while marker not in buffer:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        buffer += data
    return buffer


def _dechunk(sock, body):
    data = b""
    while True:
        body = _recv_until(sock, body, b"\r\n")
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        while len(body) < size + 2:
            body += sock.recv(65536)
        data, body = data + body[:size], body[size + 2:]
        if size == 0:
            return data


def _continue(client, headers):
    """`headers` without `Expect: 100-continue`, answered here with `100 Continue` as Cloud
    Storage answers it: the emulator (an HTTP/1.0 server) never answers it, and libcurl would
    wait a second (its expect timeout) before sending each upload's body."""
    expect = [h for h in headers if h.lower().replace(b" ", b"") == b"expect:100-continue"]
    if expect:
        client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    return [h for h in headers if h not in expect]


def _serve(client, context, emulator_port):
    try:
        request = _recv_until(client, b"", b"\r\n\r\n")
        line = request.split(b"\r\n", 1)[0]
        upstream = socket.create_connection(("127.0.0.1", emulator_port))
        if line.startswith(b"CONNECT "):
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            client = context.wrap_socket(client, server_side=True)
            # the tunnel's request (the emulator closes the connection after each response)
            head, _, body = _recv_until(client, b"", b"\r\n\r\n").partition(b"\r\n\r\n")
            line, *headers = head.split(b"\r\n")
            upstream.sendall(b"\r\n".join([line, *_continue(client, headers)]) + b"\r\n\r\n" + body)
        else:  # "PUT http://www.googleapis.com/upload/...": the emulator wants the path alone
            method, url, version = line.split(b" ")
            head, _, body = request.partition(b"\r\n\r\n")
            headers = _continue(client, head.split(b"\r\n")[1:])
            if any(h.lower().startswith(b"transfer-encoding: chunked") for h in headers):
                body = _dechunk(client, body)
                headers = [h for h in headers if not h.lower().startswith((b"transfer-encoding", b"content-length"))]
                headers.append(b"Content-Length: %d" % len(body))
            path = b"/" + url.split(b"://", 1)[1].partition(b"/")[2]
            upstream.sendall(b"\r\n".join([b" ".join([method, path, version]), *headers]) + b"\r\n\r\n" + body)
        threading.Thread(target=_pipe, args=(client, upstream), daemon=True).start()
        _pipe(upstream, client)
    except (OSError, ConnectionError, ValueError, ssl.SSLError):
        with contextlib.suppress(OSError):
            client.close()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def start(directory, bucket="trial"):
    """Starts the emulator (in memory, holding `bucket`) and the proxy; sets this process's
    environment so that TensorFlow's gs:// goes there (at most 2 retries, 10 s timeouts)."""
    from gcp_storage_emulator.handlers import objects
    from gcp_storage_emulator.server import create_server

    media_upload = objects._media_upload

    def empty_media_upload(request, response, storage):  # the emulator reads an empty body as None
        if request.data is None:
            request._data = b""
        return media_upload(request, response, storage)

    objects._media_upload = empty_media_upload
    ca, cert, key = _certificates(directory)
    emulator_port = _free_port()
    server = create_server("127.0.0.1", emulator_port, in_memory=True, default_bucket=bucket)
    server.start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"

    def accept():
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_serve, args=(client, context, emulator_port), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    os.environ.update(https_proxy=proxy, http_proxy=proxy, HTTPS_PROXY=proxy, HTTP_PROXY=proxy,
                      no_proxy="127.0.0.1,localhost", CURL_CA_BUNDLE=ca, GOOGLE_AUTH_TOKEN_FOR_TESTING="test",
                      NO_GCE_CHECK="true", GCS_RETRY_CONFIG_MAX_RETRIES="2",
                      GCS_RETRY_CONFIG_INIT_DELAY_TIME_US="100000", GCS_REQUEST_CONNECTION_TIMEOUT_SECS="10")
    try:
        yield f"gs://{bucket}"
    finally:
        listener.close()
        server.stop()


def run_script(script, directory, **constants):
    """Runs Python `script` in a process of its own (the gs:// client reads its settings when
    TensorFlow loads) in `directory`/cwd (made here), with `constants` (Python literals) and
    CERTS (`directory`/certs, for `start`) defined first and the repository and tests/ on its
    path. Returns the JSON it printed last on a line `RESULTS <json>`. Skips where
    gcp-storage-emulator or openssl is missing."""
    import json
    import sys

    import pytest

    pytest.importorskip("gcp_storage_emulator")
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the emulator's certificate")
    certs, cwd = os.path.join(directory, "certs"), os.path.join(directory, "cwd")
    os.makedirs(certs)
    os.makedirs(cwd)
    tests = os.path.dirname(os.path.abspath(__file__))
    head = "".join(f"{name} = {value!r}\n" for name, value in dict(constants, CERTS=certs).items())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(tests), tests]), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", head + script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][len("RESULTS "):])
