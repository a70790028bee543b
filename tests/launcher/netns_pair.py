"""Two network namespaces joined by a veth pair: the 'two hosts' of the netns, doctor and hostfile
tests. Skips the test (not fails) where namespaces cannot be made."""
import contextlib, os, shutil, subprocess

import pytest


def sh(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


@contextlib.contextmanager
def two_hosts(prefix, subnet_octet):
    """Namespaces {prefix}A/B with devices {prefix.lower()}a/b at 10.<subnet_octet>.<pid>.1 and .2."""
    if os.geteuid() != 0 or not shutil.which("ip"):
        pytest.skip("needs root and iproute2 to create network namespaces")
    tag = f"{os.getpid() % 10000}"
    subnet = f"10.{subnet_octet}.{os.getpid() % 250}"
    a, b = f"{prefix}A{tag}", f"{prefix}B{tag}"
    va, vb = f"{prefix.lower()}a{tag}", f"{prefix.lower()}b{tag}"
    try:
        try:
            sh("ip", "netns", "add", a)
            sh("ip", "netns", "add", b)
            sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb)
            sh("ip", "link", "set", va, "netns", a)
            sh("ip", "link", "set", vb, "netns", b)
            for ns, dev, addr in ((a, va, f"{subnet}.1"), (b, vb, f"{subnet}.2")):
                sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", dev)
                sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
                sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            pytest.skip(f"cannot create network namespaces here: {e.stderr.decode().strip()}")
        yield dict(a=a, b=b, va=va, vb=vb, addr_a=f"{subnet}.1", addr_b=f"{subnet}.2")
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
