#!/usr/bin/env python3
"""A reference client for bench/lost-machine.sh: the DataStax Python driver (from PyPI, written
by no one here) writing to the same ring at the same consistency as isobench's loaders, to a
keyspace and table of its own (RF 3, made if missing), with 8 requests in flight, counting the
requests answered (and failed) in each second of wall-clock time, so that its seconds can be
set beside isobench's around the same lost machine.

    lost-machine.py PROFILE CLUSTER_DIR USER PASSWORD CL SECONDS OUT

PROFILE is `defaults` (the driver as it comes) or `tuned` (heartbeats every 1 s with a 5-s
timeout, idempotent statements, a speculative execution after 100 ms: what isobench's client
does with `-mode speculate=100ms`). It waits for the ring (three Ready database pods, asked of
the local cluster's API server with its token), then writes for SECONDS. OUT gets one line per
second: `UNIX_SECOND ANSWERED FAILED`; the failures by kind are printed at the end.
"""

import json
import os
import ssl
import sys
import threading
import time
import urllib.request

from cassandra import ConsistencyLevel
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import ConstantSpeculativeExecutionPolicy

IN_FLIGHT = 8
FAILED_PAUSE = 0.1


def ring(cluster_dir):
    """The database pods' addresses once three are Ready (the local cluster's API server)."""
    token = open(os.path.join(cluster_dir, "token")).read().strip()
    url = "https://10.244.0.1:16443/api/v1/pods?labelSelector=isobench.dev%2Frole%3Ddatabase"
    insecure = ssl._create_unverified_context()
    while True:
        request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token})
        try:
            pods = json.load(urllib.request.urlopen(request, context=insecure))["items"]
        except OSError:
            pods = []
        ready = [
            p["status"]["podIP"]
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        if len(ready) == 3:
            return ready
        time.sleep(1)


def connect(cluster_dir, user, password, options, execution):
    """A session once the ring answers, with the client's own table made."""
    while True:
        cluster = Cluster(
            ring(cluster_dir),
            auth_provider=PlainTextAuthProvider(user, password),
            execution_profiles={EXEC_PROFILE_DEFAULT: execution},
            protocol_version=5,
            **options,
        )
        try:
            session = cluster.connect()
            session.execute(
                "CREATE KEYSPACE IF NOT EXISTS reference WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 3}"
            )
            session.execute("CREATE TABLE IF NOT EXISTS reference.writes (key blob PRIMARY KEY, value blob)")
            prepared = session.prepare("INSERT INTO reference.writes (key, value) VALUES (?, ?)")
            return cluster, session, prepared
        except Exception:
            cluster.shutdown()
            time.sleep(1)


def main():
    profile, cluster_dir, user, password, cl, seconds, out = sys.argv[1:8]
    consistency = getattr(ConsistencyLevel, cl)
    tuned = profile == "tuned"
    options = {}
    execution = ExecutionProfile(consistency_level=consistency, request_timeout=12.0)
    if tuned:
        options = {"idle_heartbeat_interval": 1, "idle_heartbeat_timeout": 5}
        execution = ExecutionProfile(
            consistency_level=consistency,
            request_timeout=12.0,
            speculative_execution_policy=ConstantSpeculativeExecutionPolicy(0.1, 2),
        )
    cluster, session, insert = connect(cluster_dir, user, password, options, execution)
    insert.is_idempotent = tuned
    counts = {}
    lock = threading.Lock()
    end = time.time() + float(seconds)
    key = [0]
    errors = {}
    repeated = [0]

    def count(what):
        second = int(time.time())
        with lock:
            answered, failed = counts.get(second, (0, 0))
            counts[second] = (answered + (what == "ok"), failed + (what == "failed"))

    def next_request():
        if time.time() >= end:
            return
        with lock:
            key[0] += 1
            k = key[0]
        future = session.execute_async(insert, (b"py%08d" % (k % 100000), os.urandom(34)))
        # With speculative executions the driver (3.30.1) may call a request's callbacks once
        # per execution: only the first ends the request, or the slots would multiply.
        ended = [False]

        def once(then):
            def call(result):
                with lock:
                    first, ended[0] = not ended[0], True
                    repeated[0] += not first
                if first:
                    then(result)

            return call

        future.add_callbacks(once(answered), once(failed))

    def answered(_):
        count("ok")
        next_request()

    def failed(error):
        count("failed")
        with lock:
            errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
        # As isobench's loaders do: a failed request is not sent again at once, so that a client
        # meeting errors does not spin and take the CPUs from the ring it measures.
        threading.Timer(FAILED_PAUSE, next_request).start()

    for _ in range(IN_FLIGHT):
        next_request()
    while time.time() < end + 13:
        time.sleep(0.5)
    with open(out, "w") as f:
        for second in sorted(counts):
            f.write("%d %d %d\n" % (second, *counts[second]))
    for name, n in sorted(errors.items()):
        print(f"failed: {n} {name}")
    print(f"callbacks called again for a request already ended: {repeated[0]}")
    cluster.shutdown()


if __name__ == "__main__":
    main()
