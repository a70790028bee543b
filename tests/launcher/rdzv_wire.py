"""A minimal, independent encoder of lf-train's rendezvous frames, for tests that must
speak to the server as a foreign, broken or hostile peer would."""
import socket, struct

MAGIC, VERSION = 0x5652464C, 4
JOIN, REFUSED = 1, 3


def frame(msg_type, payload, version=VERSION, magic=MAGIC, length=None):
    return struct.pack("<IHHI", magic, version, msg_type, len(payload) if length is None else length) + payload


def s(x):
    x = x.encode()
    return struct.pack("<I", len(x)) + x


def i64(v):
    return struct.pack("<q", v)


def join(job_id="none", token="", node_rank=-1, nproc=1, hostname="rawpeer", version="0.1.0", config_hash="",
         store_port=0, pid=1, min_nodes=1, max_nodes=1):
    return frame(JOIN, s(job_id) + s(token) + i64(node_rank) + i64(nproc) + s(hostname) + s(version) +
                 s(config_hash) + i64(store_port) + i64(pid) + i64(min_nodes) + i64(max_nodes) +
                 struct.pack("<I", 0))  # config_items: none


def connect(port, timeout=10):
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return c


def read_until_closed(sock, timeout=10):
    sock.settimeout(timeout)
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data


def refused_reason(data):
    """The reason of the first Refused frame in data, or None."""
    pos = 0
    while pos + 12 <= len(data):
        magic, version, msg_type, length = struct.unpack_from("<IHHI", data, pos)
        payload = data[pos + 12: pos + 12 + length]
        if msg_type == REFUSED:
            n = struct.unpack_from("<I", payload)[0]
            return payload[4:4 + n].decode()
        pos += 12 + length
    return None
