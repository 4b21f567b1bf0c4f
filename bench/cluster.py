#!/usr/bin/env python3
"""The same jobs locally and on a loopback Ballista cluster (a scheduler and two executors on this
machine); prints a markdown table for docs/CLUSTER.md.

    cargo build --release
    python3 bench/cluster.py                       # 20,000 debian_docs sources, 1M fingerprints
    python3 bench/cluster.py --sources 2000 --fingerprints 100000   # a quick look
    python3 bench/cluster.py --sources 200 --fingerprints 10000000  # matching at 10M
    python3 bench/cluster.py --secure              # also on a TLS + token cluster

Each job runs locally (all cores) and with --cluster against two executors of --tasks tasks each
(with --secure, also against a second such cluster with mutual TLS and a token, certificates
made with openssl); the outputs' groups must be equal or the script stops. Reports wall seconds, the stages'
seconds from summary.json, and peak resident memory of the client and of each server process.

Environment: NEARDUP (binary, default $CARGO_TARGET_DIR or target, release), DATA (default
../shared/data), WORK (scratch folder, default /tmp/neardup-cluster-bench).
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time

TARGET = os.environ.get("CARGO_TARGET_DIR", "target")
NEARDUP = os.environ.get("NEARDUP", os.path.join(TARGET, "release", "neardup"))
DATA = os.environ.get("DATA", "../shared/data")
WORK = os.environ.get("WORK", "/tmp/neardup-cluster-bench")


def neardup(*args, **kwargs):
    return subprocess.run([NEARDUP, *args], check=True, **kwargs)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_mib(pid):
    """VmHWM of a live process: its peak resident memory so far."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


TOKEN = "bench-token-of-enough-length-0001"


def certificates():
    """A CA and one certificate it signed for every process (localhost, 127.0.0.1)."""
    tls = os.path.join(WORK, "tls")
    os.makedirs(tls, exist_ok=True)
    run = lambda *a: subprocess.run(["openssl", *a], cwd=tls, check=True,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=bench-ca", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(os.path.join(tls, "ext.cnf"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
                "extendedKeyUsage=serverAuth,clientAuth\n"
                "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("req", *ec, "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=localhost")
    run("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-out", "node.pem", "-extfile", "ext.cnf")
    return ["--tls-cert", os.path.join(tls, "node.pem"), "--tls-key",
            os.path.join(tls, "node.key"), "--tls-ca", os.path.join(tls, "ca.pem")]


class Cluster:
    """A scheduler on a free port and two executors, stopped on exit; with `tls` (the TLS
    flags) every process also has the cluster's token."""

    def __init__(self, tasks, name="cluster", tls=None):
        self.logs = []
        self.procs = []
        self.name = name
        self.tls = tls or []
        self.env = dict(os.environ, NEARDUP_CLUSTER_TOKEN=TOKEN) if tls else None
        log = self._log(f"{name}-scheduler")
        self.scheduler = self._start(["scheduler", "--bind", "127.0.0.1:0", *self.tls], log)
        port = None
        for _ in range(600):
            with open(log.name) as f:
                for line in f:
                    if "scheduler listening on" in line:
                        address = line.split("listening on ", 1)[1].split()[0]
                        port = int(address.rsplit(":", 1)[1])
            if port:
                break
            time.sleep(0.1)
        if not port:
            self.stop()
            sys.exit("the scheduler did not start; see " + log.name)
        self.address = f"127.0.0.1:{port}"
        self.executors = []
        for n in range(2):
            work = os.path.join(WORK, f"{name}-executor{n}")
            os.makedirs(work, exist_ok=True)
            self.executors.append(self._start(
                ["executor", "--scheduler", self.address,
                 "--bind", f"127.0.0.1:{free_port()}",
                 "--concurrent-tasks", str(tasks), "--work-dir", work, *self.tls],
                self._log(f"{name}-executor{n}")))
        time.sleep(2)  # registration; jobs wait for executors anyway

    def _log(self, name):
        log = open(os.path.join(WORK, f"{name}.log"), "w")
        self.logs.append(log)
        return log

    def _start(self, args, log):
        proc = subprocess.Popen([NEARDUP, *args], stdout=subprocess.DEVNULL, stderr=log,
                                env=self.env)
        self.procs.append(proc)
        return proc

    def client_flags(self):
        """--cluster and, for a TLS cluster, the client's TLS flags."""
        scheme = "dfs" if self.tls else "df"
        return ["--cluster", f"{scheme}://{self.address}", *self.tls]

    def peaks(self):
        return [peak_rss_mib(p.pid) for p in [self.scheduler, *self.executors]]

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait()


def timed(args, env=None):
    """Runs neardup under /usr/bin/time; returns (wall seconds, peak RSS MiB of the client)."""
    started = time.monotonic()
    out = subprocess.run(["/usr/bin/time", "-f", "%M", NEARDUP, *args],
                         stderr=subprocess.PIPE, text=True, env=env)
    wall = time.monotonic() - started
    if out.returncode != 0:
        sys.exit(f"neardup {' '.join(args)} failed:\n{out.stderr}")
    return wall, int(out.stderr.strip().splitlines()[-1]) / 1024


def stages(output):
    with open(os.path.join(output, "summary.json")) as f:
        summary = json.load(f)
    return {s["stage"]: s["seconds"] for s in summary["stages"]}


def groups(output):
    sql = "SELECT id, group_id, representative_id FROM groups ORDER BY id"
    return neardup("query", "--data", output, "--format", "csv", sql,
                   capture_output=True, text=True).stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=20000)
    parser.add_argument("--max-copies", type=int, default=5)
    parser.add_argument("--fingerprints", type=int, default=1000000)
    parser.add_argument("--tasks", type=int, default=1, help="concurrent tasks per executor")
    parser.add_argument("--secure", action="store_true",
                        help="also run on a cluster with mutual TLS and a token")
    options = parser.parse_args()
    os.makedirs(WORK, exist_ok=True)
    corpus = os.path.join(WORK, "corpus.parquet")
    fingerprints = os.path.join(WORK, "fingerprints.parquet")
    neardup("generate", "--input", os.path.join(DATA, "debian_docs", "docs.parquet"),
            "--output", corpus, "--truth", os.path.join(WORK, "truth.parquet"),
            "--sources", str(options.sources), "--max-copies", str(options.max_copies),
            "--overwrite", stdout=subprocess.DEVNULL)
    neardup("generate-fingerprints", "--count", str(options.fingerprints), "--output",
            fingerprints, "--overwrite", stdout=subprocess.DEVNULL)
    jobs = [
        ("run", ["run", "--input", corpus]),
        ("run --matching join", ["run", "--input", corpus, "--matching", "join"]),
        ("match", ["match", "--signatures", fingerprints]),
        # The SQL rounds locally too: the cluster always clusters with them.
        ("match --clustering sql", ["match", "--signatures", fingerprints, "--clustering", "sql"]),
    ]
    clusters = [Cluster(options.tasks)]
    if options.secure:
        clusters.append(Cluster(options.tasks, "cluster TLS + token", certificates()))
    rows = []
    try:
        for name, args in jobs:
            outputs = {}
            for where in [None, *clusters]:
                label = where.name if where else "local"
                output = os.path.join(WORK, f"out-{len(rows)}")
                shutil.rmtree(output, ignore_errors=True)
                extra = where.client_flags() if where else []
                env = where.env if where else None
                wall, rss = timed([*args, "--output", output, "-q", *extra], env)
                outputs[label] = output
                rows.append((name, label, wall, rss, stages(output)))
            for label, output in outputs.items():
                if groups(outputs["local"]) != groups(output):
                    sys.exit(f"{name}: the groups on {label} differ from the local run's")
        peaks = clusters[0].peaks()
    finally:
        for cluster in clusters:
            cluster.stop()

    names = []
    for *_, st in rows:
        names += [s for s in st if s not in names]
    print(f"{options.sources} sources (up to {options.max_copies} copies each), "
          f"{options.fingerprints} fingerprints; two executors of {options.tasks} task(s)\n")
    print("| job | where | wall s | client peak MiB | " + " | ".join(names) + " |")
    print("|---|---|---|---|" + "---|" * len(names))
    for name, where, wall, rss, st in rows:
        cells = " | ".join(f"{st[s]:.2f}" if s in st else "" for s in names)
        print(f"| {name} | {where} | {wall:.2f} | {rss:.0f} | {cells} |")
    print(f"\nPeak RSS MiB over all jobs: scheduler {peaks[0]:.0f}, executors "
          f"{peaks[1]:.0f} and {peaks[2]:.0f}.")


if __name__ == "__main__":
    main()
