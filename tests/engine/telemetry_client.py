"""Reading a DPDK process's telemetry socket, for the telemetry tests.

query() goes through dpdk-telemetry.py (DPDK's client, as an operator would)
and falls back to the protocol itself when the client is not installed;
Connection keeps one socket open for fast repeated reads.

EAL notes (checked on DPDK 22.11): telemetry works with --no-shconf; the
socket is <runtime dir>/dpdk_telemetry.v2, the runtime dir being
/var/run/dpdk/<file-prefix> for root ($XDG_RUNTIME_DIR/dpdk/<file-prefix>
otherwise). EAL leaves the directory behind under --no-shconf: a test removes
the directories of the prefixes it used."""

import json
import os
import shutil
import socket
import subprocess

CLIENT = shutil.which("dpdk-telemetry.py") or "/usr/bin/dpdk-telemetry.py"


def client_name():
    return CLIENT if os.path.exists(CLIENT) else "built-in socket client"


def runtime_dir(prefix):
    # The same rule as EAL and dpdk-telemetry.py.
    base = os.environ.get("RUNTIME_DIRECTORY")
    if not base:
        base = "/var/run" if os.getuid() == 0 else os.environ.get("XDG_RUNTIME_DIR", "/tmp")
    return os.path.join(base, "dpdk", prefix)


def socket_path(prefix):
    return os.path.join(runtime_dir(prefix), "dpdk_telemetry.v2")


def query_with_client(prefix, commands):
    """dpdk-telemetry.py reads commands from stdin and prints one JSON reply per line."""
    out = subprocess.run(["/usr/bin/python3", CLIENT, "-f", prefix], input="\n".join(commands) + "\n",
                         capture_output=True, text=True, timeout=20)
    replies = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if len(replies) != len(commands):
        raise RuntimeError(f"dpdk-telemetry.py answered {len(replies)} of {len(commands)}: {out.stdout} {out.stderr}")
    return replies


class Connection:
    """The protocol: SOCK_SEQPACKET; the server greets with its limits, then one JSON reply per command."""

    def __init__(self, prefix):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.sock.connect(socket_path(prefix))
            self.max_output = json.loads(self.sock.recv(1024).decode())["max_output_len"]
        except BaseException:
            self.sock.close()
            raise

    def query(self, command):
        self.sock.send(command.encode())
        return json.loads(self.sock.recv(self.max_output).decode())

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def query_with_socket(prefix, commands):
    with Connection(prefix) as c:
        return [c.query(command) for command in commands]


def query(prefix, commands):
    return query_with_client(prefix, commands) if os.path.exists(CLIENT) else query_with_socket(prefix, commands)
