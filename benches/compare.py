#!/usr/bin/env python3
"""Side-by-side throughput and latency of ZeroMQ implementations, all through libzmq's perf tools
(`local_thr`/`remote_thr`, `local_lat`/`remote_lat`, `inproc_thr`/`inproc_lat`) or ports of them
with the same command line and output:

- `libzmq`: libzmq's tools (vendor/perf of the zeromq-src crate) on the system libzmq;
- `rzmq-native`: rzmq's perf examples (`rzmq-core/examples/*`); `rzmq-native-nospin` the same
  with `RZMQ_SPIN_US=0` (direct receives sleep at once instead of polling first);
- `rzmq-capi`: libzmq's tools with `LD_PRELOAD` of rzmq's `libzmq.so` (the C ABI path);
- `rzmq-rdma-soft`, `rzmq-capi-rdma-soft`: the same two over tcp endpoints with
  `RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft` (the examples `rzmq-benches/examples/rdma_*`
  install the RDMA upgrader; the C ABI installs it itself); `RZMQ_RDMA_LOG=1` makes both
  processes print the transport of their connection, and a run counts only when both say
  `transport rdma/soft`;
- `rzmq-async`: rzmq-tokio's async perf examples (`rzmq-tokio/examples/async_*`): the same
  roles through `AsyncSocket` on a current-thread tokio runtime (readiness from `ZMQ_FD`);
- `omq`, `zeromq-rs`, `rzmq-crate`: omq.rs, zmq.rs and the crates.io `rzmq` crate through
  `benches/peers` (a separate cargo project, outside the workspace's dependencies); skipped with
  a note when it does not build;
- `raw`: no ZeroMQ at all, the ceiling (`benches/raw/raw_perf.c`): the same roles over plain
  blocking sockets with ZMTP-like framing, reusing one buffer per side, batching small messages
  into 256 KiB writes, same-host tcp under the congestion control rzmq picks (reno, see
  `RZMQ_TCP_LOCAL_CC`). Not a competitor: what the kernel's copies and one wake-up per batch or
  per round trip cost on this machine.

Every configuration runs once per round, alternating, for several rounds; the table shows medians
and the ratio to libzmq, and is written (with the machine, versions and commands) into
docs/BENCHMARKS.md between the compare markers.

    python3 benches/compare.py [--quick] [--rounds N] [--only IMPL,...] [--no-write]
        [--sizes 64B,1KiB,...] [--transports tcp,...] [--kinds thr,lat] [--no-build]
        [--baseline DIR]

`--baseline DIR` measures an earlier build in the same rounds (before/after of a change, on the
same noisy machine): DIR holds that build's native perf examples (`local_thr`, `remote_thr`,
`local_lat`, `remote_lat`, `inproc_thr`, `inproc_lat` from target/release/examples), run as
`rzmq-native@base`, and where present its `libzmq.so` (`rzmq-capi@base`) and its async
examples (`async_local_lat`, ...: `rzmq-async@base`); where DIR also holds the RDMA examples
(`rdma_local_thr`, `rdma_remote_thr`, `rdma_local_lat`, `rdma_remote_lat`), they run as
`rzmq-rdma-soft@base` (and with that build's `libzmq.so` as `rzmq-capi-rdma-soft@base`).

`--scale` runs instead the cost-as-work-grows rows of issue 30 (`benches/scale/scale.c`, compiled
once against zmq.h and run on libzmq and, through LD_PRELOAD, on rzmq's C ABI): PUB to 1, 10 and
100 SUBs, a ROUTER serving 1, 100 and 1000 DEALERs, 1, 2 and 4 independent PUSH/PULL pairs in one
process, RSS per connection and per idle socket; written between the scale markers of
docs/BENCHMARKS.md.

    python3 benches/compare.py --scale [--rounds N] [--no-write] [--no-build] [--scale-env VAR=VALUE,...]

(`--scale-env` adds a third column: rzmq's C ABI with those settings.) `--sizes`, `--transports`
and `--kinds` run part of the main table (printed, never written); every run's value goes to
stderr as it comes.
"""
import argparse, datetime, json, os, platform, re, socket, statistics, subprocess, sys, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "benches", "build")
PEERS = os.path.join(ROOT, "benches", "peers")
EXAMPLES = os.path.join(ROOT, "target", "release", "examples")
PEER_BIN = os.path.join(PEERS, "target", "release")
LIBZMQ_SO = os.path.join(ROOT, "target", "release", "libzmq.so")
RAW_PERF = os.path.join(BUILD, "raw_perf")
SCALE = os.path.join(BUILD, "scale")

ROLES = ["local_thr", "remote_thr", "local_lat", "remote_lat", "inproc_thr", "inproc_lat"]
RDMA_ENV = {"RZMQ_RDMA": "require", "RZMQ_RDMA_PROVIDER": "soft", "RZMQ_RDMA_LOG": "1"}
RDMA_PROOF = "transport rdma/soft"

# (size, throughput message count, latency round trips): about 1 s per run for libzmq over tcp
# on a 2-core machine. --quick takes the marked sizes with the counts divided by QUICK_DIV, but
# at least QUICK_MIN: local_thr times from the first message to the last, and with a handful of
# large messages the transfers that overlap the first one inflate the rate (10 x 16 MiB over
# RDMA soft read 6x faster than 60). Throughput runs of 1 KiB and less keep their full counts
# (QUICK_SMALL): divided, the fast implementations finish 64 B in tens of milliseconds, within
# the noise of connection set-up and scheduling on two cores (a C ABI cell read 0.71 of native
# in such a table, against 0.89-0.94 in hand runs of 5 M messages).
#
# Issue 30: the small sizes' counts were set for libzmq's 1 s, and rzmq moves 64 B and 1 KiB at 2-4x
# libzmq's rate, so its runs lasted 0.1-0.2 s (400,000 x 1 KiB at 3 M msg/s: 0.13 s), of which
# connection set-up, the first fills of the allocator and frame caches and TCP's window growth
# were a large share, and one scheduling hiccup on two shared cores moved a whole run: a one-run
# table read 2.50x for native 1 KiB where hand sets of 1-2 s runs read 3.5-4.3x. In alternating
# sets on a loaded host, single 400,000-message runs gave ratios from 1.1x to 7.5x, 2,000,000-message
# runs 3.0-3.4x. The counts below keep rzmq's runs at 0.5 s or more.
KiB, MiB = 1 << 10, 1 << 20
CASES = [
    (8, 6_000_000, 10_000),
    (64, 6_000_000, 10_000),
    (1 * KiB, 2_000_000, 10_000),
    (64 * KiB, 20_000, 4_000),
    (1 * MiB, 5_000, 500),
    (16 * MiB, 60, 40),
]
QUICK_THR = [64, 1 * KiB, 64 * KiB, 1 * MiB, 16 * MiB]
QUICK_LAT = [64, 64 * KiB, 1 * MiB]
QUICK_DIV = 6
QUICK_MIN = 30
QUICK_SMALL = 1 * KiB
# Quick throughput runs up to 1 MiB take at least this many messages (or the full count): three
# high-water marks' worth. A sender runs up to 1000 messages ahead, so a shorter run times
# little but fresh storage being faulted in (200 x 1 MiB read 0.90x for rzmq in a quick table,
# against 1.15-1.34x in hand runs of 5000).
QUICK_STEADY = 3_000
# inproc moves a message by handing over its pointer, whatever its size: at the tcp counts its
# large-size runs last a few milliseconds (three quick runs of 3,333 x 64 KiB read 1.4-3.4 M
# msg/s for rzmq and 0.2-1.3 M for libzmq). Its throughput runs up to 1 MiB take at least this
# many messages (divided by QUICK_DIV under --quick). Larger sizes keep their counts: with the
# high-water mark of 1000, an implementation that copies could hold 16 GB at 16 MiB.
INPROC_THR_MIN = 400_000
# Issue 38: an inproc round trip costs the same at every size (the message's pointer goes back and
# forth: 4,900 instructions per round trip at 64 B and 5,100 at 1 MiB under callgrind, libzmq 4,600
# and 4,700), two thread wake-ups and nothing else. At the tcp counts a quick 1 MiB run was 83
# round trips, 1-3 ms of timing in which one wait behind the host's other work moved a whole run
# (83-round-trip runs of one binary read 3.9 to 283 us on the shared 2-core host), and the median
# of two or three such runs put rzmq at 1.18x of libzmq where runs of 1000-3000 round trips read
# 0.64-0.81x. Inproc latency runs up to 1 MiB take at least this many round trips, quick or not
# (about 0.1 s per run).
INPROC_LAT_MIN = 4_000


def quick_thr_count(size, count):
    """The message count of a --quick throughput run (see QUICK_SMALL and QUICK_STEADY)."""
    if size <= QUICK_SMALL:
        return count
    if size <= MiB:
        return min(count, max(QUICK_STEADY, count // QUICK_DIV))
    return max(QUICK_MIN, count // QUICK_DIV)


def sh(cmd, **kw):
    print("+ " + " ".join(cmd), file=sys.stderr)
    subprocess.check_call(cmd, **kw)


def zeromq_src_vendor():
    meta = json.loads(subprocess.check_output(["cargo", "metadata", "--format-version", "1"], cwd=ROOT))
    for p in meta["packages"]:
        if p["name"] == "zeromq-src" and p["version"].startswith("0.3"):
            return os.path.join(os.path.dirname(p["manifest_path"]), "vendor")
    sys.exit("zeromq-src 0.3 not found in cargo metadata")


def build(notes, cargo=True):
    """Builds libzmq's tools, rzmq's examples and C ABI, and the Rust peers (not with cargo=False:
    then only the C tools). Returns whether the peers built."""
    os.makedirs(BUILD, exist_ok=True)
    perf = os.path.join(zeromq_src_vendor(), "perf")
    # inproc_*.cpp include the configure-generated platform.hpp only for ZMQ_HAVE_WINDOWS.
    open(os.path.join(BUILD, "platform.hpp"), "a").close()
    for t in ROLES:
        out = os.path.join(BUILD, "libzmq_" + t)
        if not os.path.exists(out):
            sh(["g++", "-O2", "-I", BUILD, "-o", out, os.path.join(perf, t + ".cpp"), "-lzmq", "-lpthread"])
    sh(["cc", "-O2", "-o", RAW_PERF, os.path.join(ROOT, "benches", "raw", "raw_perf.c")])
    # Compiled once, against the system zmq.h and libzmq; rzmq runs the same binary (LD_PRELOAD).
    sh(["cc", "-O2", "-o", SCALE, os.path.join(ROOT, "benches", "scale", "scale.c"), "-lzmq", "-lpthread"])
    if not cargo:
        return os.path.exists(os.path.join(PEER_BIN, "omq_local_thr"))
    sh(["cargo", "build", "--release", "-p", "rzmq-capi"], cwd=ROOT)
    sh(["cargo", "build", "--release", "-p", "rzmq-core", "-p", "rzmq-benches", "-p", "rzmq-tokio", "--examples"],
       cwd=ROOT)
    try:
        sh(["cargo", "build", "--release", "--locked", "--manifest-path", os.path.join(PEERS, "Cargo.toml")])
        return True
    except subprocess.CalledProcessError as e:
        notes.append("The Rust peers (benches/peers) did not build (`cargo build` exit %d): "
                     "omq, zeromq-rs and rzmq-crate are left out." % e.returncode)
        return False


def libzmq_tools():
    return {r: [os.path.join(BUILD, "libzmq_" + r)] for r in ROLES}


def peer_tools(prefix, roles):
    return {r: [os.path.join(PEER_BIN, prefix + "_" + r)] for r in roles}


def implementations(peers_built):
    """name -> (tools by role, environment, transports, proven on RDMA)."""
    native = {r: [os.path.join(EXAMPLES, r)] for r in ROLES}
    rdma = {r: [os.path.join(EXAMPLES, "rdma_" + r)] for r in ROLES[:4]}
    capi = {"LD_PRELOAD": LIBZMQ_SO}
    impls = {
        "libzmq": (libzmq_tools(), {}, ["tcp", "ipc", "inproc"], False),
        "rzmq-native": (native, {}, ["tcp", "ipc", "inproc"], False),
        # Without polling before sleeping in direct receives (on by default, see
        # docs/ARCHITECTURE.md): what the latency rows owe to it, and what throughput does without.
        "rzmq-native-nospin": (native, {"RZMQ_SPIN_US": "0"}, ["tcp", "ipc"], False),
        # The C ABI installs the RDMA upgrader itself; off keeps these rows on tcp even where an
        # RDMA device would be found.
        "rzmq-capi": (libzmq_tools(), dict(capi, RZMQ_RDMA="off"), ["tcp", "ipc", "inproc"], False),
        "rzmq-rdma-soft": (rdma, dict(RDMA_ENV), ["tcp"], True),
        "rzmq-capi-rdma-soft": (libzmq_tools(), dict(capi, **RDMA_ENV), ["tcp"], True),
        # rzmq-tokio's AsyncSocket (async_<tool> examples, a current-thread runtime per side).
        "rzmq-async": ({r: [os.path.join(EXAMPLES, "async_" + r)] for r in ROLES}, {}, ["tcp", "ipc", "inproc"], False),
    }
    if peers_built:
        impls["omq"] = (peer_tools("omq", ROLES), {}, ["tcp", "ipc", "inproc"], False)
        # zmq.rs has no inproc transport.
        impls["zeromq-rs"] = (peer_tools("zeromq_rs", ROLES[:4]), {}, ["tcp", "ipc"], False)
        impls["rzmq-crate"] = (peer_tools("rzmq_crate", ROLES), {}, ["tcp", "ipc", "inproc"], False)
    # The ceiling: plain sockets, no ZeroMQ (see benches/raw/raw_perf.c).
    impls["raw"] = ({r: [RAW_PERF, r] for r in ROLES[:4]}, {}, ["tcp", "ipc"], False)
    return impls


def port_base():
    """A port range outside the kernel's ephemeral ports: a listener on a port some outgoing
    connection holds fails to bind ("Address in use") and its peer waits for ever."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    return lo - 12000 if lo > 13024 else hi + 1


PORT = [port_base()]


def free_port():
    """The next port that 127.0.0.1 can bind now."""
    while True:
        PORT[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", PORT[0]))
                return PORT[0]
            except OSError:
                continue


def endpoint(transport):
    if transport == "tcp":
        return "tcp://127.0.0.1:%d" % free_port()
    PORT[0] += 1
    return "ipc:///tmp/rzmq-bench-%d-%d.sock" % (os.getpid(), PORT[0])


def clean_env(extra):
    # Nothing of the caller's RZMQ_* or LD_PRELOAD settings leaks into a row.
    e = {k: v for k, v in os.environ.items() if not k.startswith("RZMQ_") and k != "LD_PRELOAD"}
    e.update(extra)
    return e


def run_procs(cmds, env, timeout):
    """Starts the commands (0.2 s apart: the first binds), waits for all, kills all past the
    timeout. Returns [(returncode or None, stdout, stderr)]."""
    procs = []
    for i, c in enumerate(cmds):
        if i:
            time.sleep(0.2)
        procs.append(subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    deadline = time.time() + timeout
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=max(0.1, deadline - time.time()))
            out.append((p.returncode, so, se))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            so, se = p.communicate()
            out.append((None, so, se))
    return out


# CPU seconds (user + system) of the last measure()'s processes together, from RUSAGE_CHILDREN:
# printed with each run's value on stderr (less moved by other work on the host than the rates).
LAST_CPU = [None]


def measure(spec, kind, transport, size, count, timeout):
    """One run. Returns (value or None, why not)."""
    tools, env, _, rdma = spec
    e = clean_env(env)
    import resource
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        return _measure(tools, e, rdma, kind, transport, size, count, timeout)
    finally:
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        LAST_CPU[0] = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)


def _measure(tools, e, rdma, kind, transport, size, count, timeout):
    if transport == "inproc":
        role = "inproc_" + kind
        if role not in tools:
            return None, "no %s" % role
        res = run_procs([tools[role] + [str(size), str(count)]], e, timeout)
        report = res[0][1]
    else:
        ep = endpoint(transport)
        args = [ep, str(size), str(count)]
        server, client = ("local_thr", "remote_thr") if kind == "thr" else ("local_lat", "remote_lat")
        res = run_procs([tools[server] + args, tools[client] + args], e, timeout)
        report = res[0][1] if kind == "thr" else res[1][1]
    if any(rc is None for rc, _, _ in res):
        # libzmq's perf tools print their errors (a failed bind) on stdout.
        tails = ["; ".join((so + se).strip().splitlines()[-2:]) for _, so, se in res]
        return None, "timed out after %d s; stderr: %s" % (timeout, " | ".join(t[-300:] for t in tails))
    bad = [(rc, se) for rc, _, se in res if rc != 0]
    if bad:
        return None, "exit %s: %s" % (bad[0][0], bad[0][1].strip()[-200:])
    if rdma:
        for _, _, se in res:
            if RDMA_PROOF not in se:
                return None, "not on RDMA: %r" % se.strip()[-200:]
    pat = r"mean throughput: (\d+) \[msg/s\]" if kind == "thr" else r"average latency: ([\d.]+) \[us\]"
    m = re.search(pat, report)
    if not m:
        return None, "no result in %r" % report[-200:]
    return float(m.group(1)), None


def fmt_size(n):
    if n >= MiB and n % MiB == 0:
        return "%d MiB" % (n // MiB)
    if n >= KiB and n % KiB == 0:
        return "%d KiB" % (n // KiB)
    return "%d B" % n


def parse_size(text):
    """'64B', '1KiB', '16MiB' (or a plain number of bytes) -> bytes."""
    m = re.fullmatch(r"\s*(\d+)\s*(B|KiB|MiB)?\s*", text)
    if not m:
        sys.exit("bad size %r (e.g. 64B, 1KiB, 1MiB)" % text)
    return int(m.group(1)) * {None: 1, "B": 1, "KiB": KiB, "MiB": MiB}[m.group(2)]


def fmt_thr(v):
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e4:
        return "%.0fk" % (v / 1e3)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v


def fmt_lat(v):
    return "%.1f" % v if v < 1000 else "%.0f" % v


def peer_versions():
    lock = os.path.join(PEERS, "Cargo.lock")
    if not os.path.exists(lock):
        return "unknown (no benches/peers/Cargo.lock)"
    text = open(lock).read()
    found = []
    for name in ["omq-tokio", "zeromq", "rzmq", "tokio"]:
        m = re.search(r'name = "%s"\nversion = "([^"]+)"' % re.escape(name), text)
        if m:
            found.append("%s %s" % (name, m.group(1)))
    return ", ".join(found)


def libzmq_version():
    try:
        v = subprocess.check_output(["dpkg-query", "-W", "-f", "${Version}", "libzmq5"], text=True,
                                    stderr=subprocess.DEVNULL)
        return "Debian libzmq5 %s" % v
    except (OSError, subprocess.CalledProcessError):
        return "the system libzmq"


# --- Cost as work grows (issue 30): benches/scale/scale.c, one binary on both libraries ---------

SCALE_IMPLS = {
    "libzmq": {},
    "rzmq-capi": {"LD_PRELOAD": LIBZMQ_SO, "RZMQ_RDMA": "off"},
}
# (group, row label, arguments after the mode (endpoints filled in per run), unit, higher is
# better). Counts give about 1-2 s per run for libzmq on a loaded 2-core machine; connection set-up
# is never timed (scale.c waits for a message through every connection first).
SCALE_SIZE = 64
SCALE_ROWS = [
    ("pubsub", "PUB to 1 SUB", (1, SCALE_SIZE, 2_000_000), "msg/s delivered", True),
    ("pubsub", "PUB to 10 SUBs", (10, SCALE_SIZE, 200_000), "msg/s delivered", True),
    ("pubsub", "PUB to 100 SUBs", (100, SCALE_SIZE, 20_000), "msg/s delivered", True),
    ("router", "ROUTER, 1 DEALER", (1, SCALE_SIZE, 1_000_000), "round trips/s", True),
    ("router", "ROUTER, 100 DEALERs", (100, SCALE_SIZE, 60_000), "round trips/s", True),
    ("router", "ROUTER, 1000 DEALERs", (1000, SCALE_SIZE, 30_000), "round trips/s", True),
    ("pairs", "1 PUSH/PULL pair", (1, SCALE_SIZE, 4_000_000), "msg/s, all pairs", True),
    ("pairs", "2 pairs, a thread per socket", (2, SCALE_SIZE, 2_000_000), "msg/s, all pairs", True),
    ("pairs", "4 pairs, a thread per socket", (4, SCALE_SIZE, 1_000_000), "msg/s, all pairs", True),
    ("memory", "RSS per connection (1000 DEALERs to a ROUTER)", (1000,), "bytes", False),
    ("idle", "RSS per idle socket (1000 DEALERs)", (1000,), "bytes", False),
]


def scale_argv(group, args):
    """scale.c's command line for one run of a row (fresh endpoints each run)."""
    a = [str(x) for x in args]
    if group in ("pubsub", "router", "memory"):
        return [SCALE, group, endpoint("tcp")] + a
    if group == "pairs":
        return [SCALE, group, ",".join(endpoint("tcp") for _ in range(args[0]))] + a
    return [SCALE, group] + a


def scale_measure(group, args, env, timeout):
    """One run. Returns (value, (CPU us per operation or None, detail line)) or (None, why not)."""
    res = run_procs([scale_argv(group, args)], clean_env(env), timeout)
    rc, so, se = res[0]
    if rc is None:
        return None, "timed out after %d s; %s" % (timeout, (so + se).strip()[-300:])
    if rc != 0:
        return None, "exit %s: %s" % (rc, (so + se).strip()[-300:])
    m = re.search(r"^result: ([\d.]+)", so, re.M)
    if not m:
        return None, "no result in %r" % so[-200:]
    c = re.search(r"^cpu: ([\d.]+) us", so, re.M)
    lines = [l for l in so.strip().splitlines() if not l.startswith(("result:", "cpu:"))]
    return float(m.group(1)), (float(c.group(1)) if c else None, lines[0] if lines else "")


def fmt_scale(v, unit):
    if unit == "bytes":
        return "%.1f KiB" % (v / 1024) if v >= 1024 else "%.0f B" % v
    return fmt_thr(v)


def run_scale(a):
    """--scale: every row once per round for each library, alternating; medians, ratios."""
    rounds = a.rounds or 3
    timeout = a.timeout or 120
    started = time.time()
    impls = dict(SCALE_IMPLS)
    if a.scale_env:
        # A third column: rzmq's C ABI with extra settings (e.g. RZMQ_FRAMED_NAP_EMPTY=0).
        extra_env = dict(kv.split("=", 1) for kv in a.scale_env.split(","))
        impls["rzmq-capi " + a.scale_env] = dict(SCALE_IMPLS["rzmq-capi"], **extra_env)
    results, failures, details, cpu = {}, {}, {}, {}
    for r in range(rounds):
        for group, label, args, unit, _ in SCALE_ROWS:
            for name, env in impls.items():
                v, why = scale_measure(group, args, env, timeout)
                if v is None:
                    failures.setdefault((label, name), []).append(why)
                    print("FAILED %s %s: %s" % (label, name, why), file=sys.stderr)
                else:
                    results.setdefault((label, name), []).append(v)
                    if why[0] is not None:
                        cpu.setdefault((label, name), []).append(why[0])
                    details.setdefault((label, name), []).append(why[1])
                    print("%s %s: %s (cpu %s us/op)" % (label, name, v, why[0]), file=sys.stderr)
        print("round %d done (%.0f s)" % (r + 1, time.time() - started), file=sys.stderr)

    med = {k: statistics.median(v) for k, v in results.items()}
    names = list(impls)
    others = names[1:]
    head = ["workload", "unit", "libzmq"]
    for n in others:
        head += [n, "%s / libzmq" % n]
    head += ["%s vs its first row" % n for n in names]
    head += ["CPU us/op, %s" % n for n in names] + ["rzmq-capi's runs"]
    cpu_med = {k: statistics.median(v) for k, v in cpu.items()}
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    first = {}
    for group, label, args, unit, higher in SCALE_ROWS:
        vals = [med.get((label, n)) for n in names]
        first.setdefault(group, vals)
        cell = lambda v: fmt_scale(v, unit) if v is not None else "failed"
        row = [label, unit, cell(vals[0])]
        for v in vals[1:]:
            row += [cell(v), "%.2fx" % (v / vals[0]) if v and vals[0] else ""]
        for v, f in zip(vals, first[group]):
            row.append("%.2fx" % (v / f) if v and f and group in ("pubsub", "router", "pairs") else "")
        c0 = cpu_med.get((label, names[0]))
        for i, n in enumerate(names):
            c = cpu_med.get((label, n))
            row.append("" if c is None else "%.3f" % c if i == 0 or not c0 else "%.3f (%.2fx)" % (c, c / c0))
        runs = ", ".join(fmt_scale(v, unit) for v in results.get((label, "rzmq-capi"), []))
        for name in names:
            if (label, name) in failures:
                runs += " [%s: %d of %d runs failed]" % (name, len(failures[(label, name)]), rounds)
        row.append(runs)
        lines.append("| " + " | ".join(row) + " |")
    table = "\n".join(lines)
    extra = []
    for group, label, args, unit, _ in SCALE_ROWS:
        if group in ("memory", "idle"):
            for name in impls:
                d = details.get((label, name))
                if d:
                    extra.append("- %s, %s (last run): %s" % (label, name, d[-1]))
    notes = ["%s %s: %d of %d runs failed (%s)." % (k[0], k[1], len(w), rounds, w[0])
             for k, w in sorted(failures.items())]
    print(table)
    for e in extra:
        print(e)
    for n in notes:
        print("note: " + n, file=sys.stderr)
    if a.no_write:
        return
    try:
        head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
        dirty = subprocess.call(["git", "diff", "--quiet", "HEAD", "--", "rzmq-core", "rzmq-capi"], cwd=ROOT)
    except (OSError, subprocess.CalledProcessError):
        head, dirty = "unknown", 0
    try:
        so_built = datetime.datetime.utcfromtimestamp(os.path.getmtime(LIBZMQ_SO)).strftime("%Y-%m-%d %H:%M UTC")
    except OSError:
        so_built = "unknown"
    cmd = "python3 benches/compare.py --scale --rounds %d%s%s" % (
        rounds, " --no-build" if a.no_build else "", " --scale-env " + a.scale_env if a.scale_env else "")
    block = [
        "<!-- scale:begin -->",
        "Generated by `%s` on %s (%.0f s), rzmq at %s%s (`target/release/libzmq.so` built %s), %d cores"
        " (load average at the end: %s)."
        % (cmd, datetime.date.today().isoformat(), time.time() - started, head,
           " with uncommitted changes in rzmq-core/rzmq-capi" if dirty else "",
           so_built, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg())),
        "",
        "One binary, `benches/build/scale` (`cc -O2 benches/scale/scale.c -lzmq -lpthread`, against the",
        "system zmq.h), run on libzmq (%s) and on rzmq's C ABI (`LD_PRELOAD=target/release/libzmq.so"
        % libzmq_version(),
        "RZMQ_RDMA=off`), alternating, %d rounds; cells are medians, %d B messages over"
        % (rounds, SCALE_SIZE),
        "`tcp://127.0.0.1`. \"vs its first row\": the row's median over the first row of its group for",
        "the same library (how each library's throughput holds up as the work grows). \"CPU us/op\": the",
        "median over the rounds of the process's CPU time (getrusage, every thread, the libraries' I/O",
        "threads included) over the timed part, per message delivered or round trip, and its ratio to",
        "libzmq's (lower is better; less moved by other work on the host than wall time). Memory: lower is",
        "better. Arguments per row (`scale <mode> <endpoint(s)> ...`): %s." % "; ".join(
            "%s `%s %s`" % (label, group, " ".join(str(x) for x in args)) for group, label, args, _, _ in SCALE_ROWS),
        "",
        table,
    ]
    if extra:
        block += [""] + extra
    if notes:
        block += [""] + ["Note: " + n for n in notes]
    block.append("<!-- scale:end -->")
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    text = open(path).read()
    new = "\n".join(block)
    if "<!-- scale:begin -->" in text:
        text = re.sub(r"<!-- scale:begin -->.*<!-- scale:end -->", lambda _: new, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n## Cost as work grows (issue 30)\n\n" + new + "\n"
    open(path, "w").write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, help="rounds (5, quick 2)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes; counts above 1 KiB / %d (up to 1 MiB at least %d)" % (QUICK_DIV, QUICK_STEADY))
    ap.add_argument("--only", help="comma-separated implementations (libzmq is always run)")
    ap.add_argument("--timeout", type=int, help="seconds per run before it is killed (120, quick 30)")
    ap.add_argument("--no-write", action="store_true", help="print the table, leave docs/ alone")
    ap.add_argument("--scale", action="store_true", help="the cost-as-work-grows rows instead (issue 30)")
    ap.add_argument("--scale-env", help="with --scale: a third column, rzmq's C ABI with these VAR=VALUE,... settings")
    ap.add_argument("--no-build", action="store_true", help="build only the C tools; use target/ as it is")
    ap.add_argument("--sizes", help="comma-separated sizes to keep (e.g. 64B,1KiB); with it, nothing is written")
    ap.add_argument("--transports", help="comma-separated transports to keep (tcp,ipc,inproc); with it, nothing is written")
    ap.add_argument("--kinds", help="thr, lat or both; with it, nothing is written")
    ap.add_argument("--baseline", help="a directory holding an earlier build (its libzmq.so, native perf examples "
                    "and async_* examples, each optional but the native ones): adds rzmq-native@base, "
                    "rzmq-capi@base and rzmq-async@base to the same rounds; nothing is written")
    a = ap.parse_args()
    if a.scale:
        build([], cargo=not a.no_build)
        return run_scale(a)
    a.rounds = a.rounds or (2 if a.quick else 5)
    a.timeout = a.timeout or (30 if a.quick else 120)
    if a.sizes or a.transports or a.kinds:
        a.no_write = True  # a partial table never replaces the full one
    notes = []
    impls = implementations(build(notes, cargo=not a.no_build))
    if a.baseline:
        # Before/after in one run: the earlier build alternates with this one in every round.
        d = os.path.abspath(a.baseline)
        impls["rzmq-native@base"] = ({r: [os.path.join(d, r)] for r in ROLES}, {}, ["tcp", "ipc", "inproc"], False)
        if os.path.exists(os.path.join(d, "libzmq.so")):
            impls["rzmq-capi@base"] = (libzmq_tools(), {"LD_PRELOAD": os.path.join(d, "libzmq.so"), "RZMQ_RDMA": "off"},
                                       ["tcp", "ipc", "inproc"], False)
        if os.path.exists(os.path.join(d, "async_local_lat")):
            impls["rzmq-async@base"] = ({r: [os.path.join(d, "async_" + r)] for r in ROLES}, {},
                                        ["tcp", "ipc", "inproc"], False)
        if all(os.path.exists(os.path.join(d, "rdma_" + r)) for r in ROLES[:4]):
            impls["rzmq-rdma-soft@base"] = ({r: [os.path.join(d, "rdma_" + r)] for r in ROLES[:4]}, dict(RDMA_ENV),
                                            ["tcp"], True)
            if os.path.exists(os.path.join(d, "libzmq.so")):
                impls["rzmq-capi-rdma-soft@base"] = (libzmq_tools(),
                                                     dict(RDMA_ENV, LD_PRELOAD=os.path.join(d, "libzmq.so")),
                                                     ["tcp"], True)
        a.no_write = True
    if a.only:
        keep = set(a.only.split(",")) | {"libzmq"}
        impls = {k: v for k, v in impls.items() if k in keep}
    thr_cases = [(s, c) for s, c, _ in CASES]
    lat_cases = [(s, c) for s, _, c in CASES]
    if a.quick:
        thr_cases = [(s, quick_thr_count(s, c)) for s, c in thr_cases if s in QUICK_THR]
        lat_cases = [(s, max(QUICK_MIN, c // QUICK_DIV)) for s, c in lat_cases if s in QUICK_LAT]
    if a.sizes:
        keep = {parse_size(x) for x in a.sizes.split(",")}
        thr_cases = [(s, c) for s, c in thr_cases if s in keep]
        lat_cases = [(s, c) for s, c in lat_cases if s in keep]
    if a.kinds:
        kinds = set(a.kinds.split(","))
        thr_cases = thr_cases if "thr" in kinds else []
        lat_cases = lat_cases if "lat" in kinds else []
    inproc_min = INPROC_THR_MIN // QUICK_DIV if a.quick else INPROC_THR_MIN
    transports = a.transports.split(",") if a.transports else ["tcp", "ipc", "inproc"]
    results, failures = {}, {}
    started = time.time()
    for r in range(a.rounds):
        for transport in transports:
            for kind, cases in (("thr", thr_cases), ("lat", lat_cases)):
                for size, count in cases:
                    if kind == "thr" and transport == "inproc" and size <= MiB:
                        count = max(count, inproc_min)
                    if kind == "lat" and transport == "inproc" and size <= MiB:
                        count = max(count, INPROC_LAT_MIN)
                    for name, spec in impls.items():
                        if transport not in spec[2]:
                            continue
                        key = (kind, transport, size, name)
                        v, why = measure(spec, kind, transport, size, count, a.timeout)
                        if v is None:
                            failures.setdefault(key, []).append(why)
                            print("FAILED %s: %s" % (key, why), file=sys.stderr)
                        else:
                            results.setdefault(key, []).append(v)
                            print("%s %s %s %s: %s (CPU of both processes: %.0f ns per %s)" % (
                                kind, transport, fmt_size(size), name, v, LAST_CPU[0] * 1e9 / count,
                                "message" if kind == "thr" else "round trip"), file=sys.stderr)
        print("round %d done (%.0f s)" % (r + 1, time.time() - started), file=sys.stderr)

    names = list(impls)
    lines = ["| test | transport | size | " + " | ".join(names) + " |",
             "| --- | --- | --- |" + " --- |" * len(names)]
    for kind, cases in (("thr", thr_cases), ("lat", lat_cases)):
        for transport in transports:
            for size, _ in cases:
                base = results.get((kind, transport, size, "libzmq"))
                base = statistics.median(base) if base else None
                cells = []
                for name in names:
                    key = (kind, transport, size, name)
                    if transport not in impls[name][2]:
                        cells.append("n/a")
                    elif key not in results:
                        cells.append("failed")
                    else:
                        med = statistics.median(results[key])
                        cell = fmt_thr(med) if kind == "thr" else fmt_lat(med)
                        if base:
                            cell += " (%.2fx)" % (med / base)
                        if key in failures:
                            cell += " [%d of %d runs failed]" % (len(failures[key]), a.rounds)
                        cells.append(cell)
                test = "throughput, msg/s" if kind == "thr" else "latency, us one-way"
                lines.append("| %s | %s | %s | %s |" % (test, transport, fmt_size(size), " | ".join(cells)))
    table = "\n".join(lines)

    def ratios(num, den, transport, sizes):
        """'<size> <median ratio>' of two throughput rows, for the sizes both measured."""
        cells = []
        for size in sizes:
            n = results.get(("thr", transport, size, num))
            d = results.get(("thr", transport, size, den))
            if n and d:
                cells.append("%s %.2f" % (fmt_size(size), statistics.median(n) / statistics.median(d)))
        return ", ".join(cells)

    # The issue-5 targets that compare two of our own rows rather than a row with libzmq.
    derived = []
    sizes = [size for size, _ in thr_cases]
    for transport in ("tcp", "ipc"):
        cells = ratios("rzmq-capi", "rzmq-native", transport, sizes)
        if cells:
            derived.append("- C ABI / native throughput, %s (target: 0.90 or more): %s." % (
                transport, cells))
    # Large frames: those above the rendezvous threshold (rzmq-rdma's DEFAULT_THRESHOLD, 64 KiB),
    # which travel by RDMA READ; smaller ones are copied through the credit ring.
    cells = ratios("rzmq-rdma-soft", "rzmq-native", "tcp", [s for s in sizes if s > 64 * KiB])
    if cells:
        derived.append("- RDMA soft / native tcp throughput, frames above the 64 KiB rendezvous "
                       "threshold (target: 1.00 or more): %s." % cells)
    for key, whys in sorted(failures.items()):
        notes.append("%s %s %s %s: %d of %d runs failed (%s)." % (
            {"thr": "throughput", "lat": "latency"}[key[0]], key[1], fmt_size(key[2]), key[3],
            len(whys), a.rounds, whys[0]))
    print(table)
    for d in derived:
        print(d)
    for n in notes:
        print("note: " + n, file=sys.stderr)
    if a.no_write:
        return

    cpu = ""
    try:
        cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")][0]
    except (OSError, IndexError):
        pass
    thr_counts = ", ".join("%s: %d" % (fmt_size(s), c) for s, c in thr_cases)
    lat_counts = ", ".join("%s: %d" % (fmt_size(s), c) for s, c in lat_cases)
    cmd = "python3 benches/compare.py --rounds %d%s%s" % (
        a.rounds, " --quick" if a.quick else "", " --only " + a.only if a.only else "")
    block = [
        "<!-- compare:begin -->",
        "Generated by `%s` on %s (%.0f s)." % (cmd, datetime.date.today().isoformat(), time.time() - started),
        "",
        "Machine: %s, %d cores, %s. libzmq: %s (its perf tools built from zeromq-src 0.3 vendor/perf)."
        % (cpu, os.cpu_count(), platform.platform(), libzmq_version()),
        "Rust peers (`benches/peers/Cargo.lock`): %s." % peer_versions(),
        "",
        "Each round runs every configuration once, alternating; cells are the median over the rounds",
        "and, in parentheses, its ratio to libzmq's median in the same row (for latency, lower is",
        "better). n/a: the implementation has no such transport or tool.",
        "",
        "- Throughput: `local_thr <ep> <size> <count>` (binds PULL, reports) and `remote_thr <ep> <size>",
        "  <count>` (connects PUSH, a fresh message per send); inproc: `inproc_thr <size> <count>`. Counts: %s;"
        " inproc up to 1 MiB at least %d." % (thr_counts, inproc_min),
        "- Latency: `local_lat <ep> <size> <roundtrips>` (REP, binds) and `remote_lat <ep> <size>",
        "  <roundtrips>` (REQ, reports half the mean round trip); inproc: `inproc_lat <size> <roundtrips>`.",
        "  Round trips: %s; inproc up to 1 MiB at least %d." % (lat_counts, INPROC_LAT_MIN),
        "- Endpoints: `tcp://127.0.0.1:<port>`, `ipc:///tmp/rzmq-bench-<pid>-<n>.sock`.",
        "- `libzmq`: `benches/build/libzmq_<tool>`; `rzmq-native`: `target/release/examples/<tool>`;",
        "  `rzmq-capi`: `LD_PRELOAD=target/release/libzmq.so RZMQ_RDMA=off benches/build/libzmq_<tool>`.",
        "- `rzmq-rdma-soft`: `RZMQ_RDMA=require RZMQ_RDMA_PROVIDER=soft RZMQ_RDMA_LOG=1",
        "  target/release/examples/rdma_<tool>`; `rzmq-capi-rdma-soft`: the same environment with",
        "  `LD_PRELOAD=target/release/libzmq.so benches/build/libzmq_<tool>`. A run counts only if both",
        "  processes log `%s` for their connection." % RDMA_PROOF,
        "- `rzmq-async`: `target/release/examples/async_<tool>` (rzmq-tokio's `AsyncSocket`, current-thread runtime).",
        "- `omq`, `zeromq-rs`, `rzmq-crate`: `benches/peers/target/release/{omq,zeromq_rs,rzmq_crate}_<tool>`",
        "  (`cargo build --release --locked --manifest-path benches/peers/Cargo.toml`).",
        "- `raw`: `benches/build/raw_perf <tool> ...` (`cc -O2 benches/raw/raw_perf.c`): no ZeroMQ, plain",
        "  sockets with ZMTP-like framing and one reused buffer per side, same-host tcp under reno as rzmq's;",
        "  the ceiling, not a competitor.",
        "",
        table,
    ]
    if derived:
        block += [""] + derived
    if notes:
        block += [""] + ["Note: " + n for n in notes]
    block.append("<!-- compare:end -->")
    path = os.path.join(ROOT, "docs", "BENCHMARKS.md")
    text = open(path).read() if os.path.exists(path) else "# Benchmarks\n\n"
    new = "\n".join(block)
    if "<!-- compare:begin -->" in text:
        text = re.sub(r"<!-- compare:begin -->.*<!-- compare:end -->", lambda _: new, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n## Side by side with libzmq\n\n" + new + "\n"
    open(path, "w").write(text)


if __name__ == "__main__":
    main()
