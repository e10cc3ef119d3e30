"""Two network namespaces joined by a veth pair, for cross-namespace traffic tests (root, iproute2).

Used by compat/pyzmq_vllm_traffic.py (--netns) and python/tests/omni/test_connector.py (which loads
this file by path). Each caller passes its own names and addresses, so runs of the two never collide.
Standard library only.
"""

import os
import shutil
import subprocess


def available():
    """Whether this process can make network namespaces: root and the `ip` command."""
    return os.geteuid() == 0 and shutil.which("ip") is not None


def down(names):
    """Delete the namespaces `names` (their veth ends go with them); missing ones are fine."""
    for ns in names:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def up(names, ips, veth):
    """Make namespaces names[0], names[1] joined by veth pair veth[0] (in the first, ips[0]/24) <->
    veth[1] (in the second, ips[1]/24), both ends and lo up; earlier leftovers are deleted first.

    Returns None on success, else why it failed ("COMMAND: stderr"), with everything removed again.
    """
    down(names)
    a, b = names
    va, vb = veth
    cmds = [["ip", "netns", "add", a], ["ip", "netns", "add", b],
            ["ip", "link", "add", va, "type", "veth", "peer", "name", vb],
            ["ip", "link", "set", va, "netns", a], ["ip", "link", "set", vb, "netns", b],
            ["ip", "-n", a, "addr", "add", f"{ips[0]}/24", "dev", va],
            ["ip", "-n", b, "addr", "add", f"{ips[1]}/24", "dev", vb],
            ["ip", "-n", a, "link", "set", va, "up"], ["ip", "-n", b, "link", "set", vb, "up"],
            ["ip", "-n", a, "link", "set", "lo", "up"], ["ip", "-n", b, "link", "set", "lo", "up"]]
    for c in cmds:
        r = subprocess.run(c, capture_output=True, text=True)
        if r.returncode != 0:
            down(names)
            return f"{' '.join(c)}: {r.stderr.strip()}"
    return None
