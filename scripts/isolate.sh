#!/usr/bin/env bash
# Runs a command as if on a host of its own, so that a test part can run beside another
# (scripts/test.sh): a network namespace with only loopback (its ports, its own namespaces'
# veths and addresses are its own), a private /run/netns (the namespaces it names are its own:
# two parts may both make "rzr-host-a") and a private /dev/shm (what it leaves there, and what
# its checks look for, are its own). The rest of the filesystem, the caches and the CPU are
# shared. Needs root and iproute2; the namespace goes when the command ends.
#
# usage: scripts/isolate.sh NAME CMD...     exits with CMD's status
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: scripts/isolate.sh NAME CMD..." >&2; exit 2; }
ns="rzi-$1"
shift
ip netns del "$ns" 2>/dev/null || true
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
trap 'exit 143' TERM INT
ip -n "$ns" link set lo up
# A mount namespace of its own: the tmpfs mounted there on /dev/shm and /run/netns are seen by
# the command and everything it starts (namespaces it makes included), nothing else.
ip netns exec "$ns" unshare --mount --propagation private sh -c '
    mount -t tmpfs -o mode=1777 rzmq-isolated-shm /dev/shm &&
    mount -t tmpfs -o mode=755 rzmq-isolated-netns /run/netns &&
    exec "$@"' isolate "$@"
