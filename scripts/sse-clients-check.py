#!/usr/bin/env python3
"""Follows one download's progress stream with two real SSE clients, Python's httpx-sse and
`curl -N`, against the release binary: both must see well-formed events that end with
`completed`. The origin is a local http.server on loopback (hence --allow-private-networks).

usage: sse-clients-check.py PATH/TO/download-service WORKDIR
"""
import http.server
import json
import os
import subprocess
import sys
import threading

import httpx
from httpx_sse import connect_sse

# Wall-clock bound on the whole check (a 32 MiB loopback download and two streams take seconds).
# Read timeouts alone do not bound it: the stream's `: keep-alive` comments reset them, and
# iter_sse() never yields comments, so a stream that stalls short of `completed` would run forever.
DEADLINE_SECONDS = 120


def main() -> int:
    binary, work = sys.argv[1], sys.argv[2]
    www = os.path.join(work, "www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "blob.bin"), "wb") as f:
        f.write(os.urandom(32 << 20))
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=www)  # noqa: E731
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{origin.server_address[1]}/blob.bin"

    service = subprocess.Popen(
        [binary, "--port", "0", "--allow-private-networks", "--state-dir", f"{work}/state",
         "--cache-dir", f"{work}/cache", "--data-dir", f"{work}/data"],
        stderr=subprocess.PIPE, text=True)
    expired = threading.Event()

    def expire():
        expired.set()
        service.kill()  # ends the stream (and any blocked read) instead of waiting on it

    watchdog = threading.Timer(DEADLINE_SECONDS, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        first = json.loads(service.stderr.readline())
        base = f"http://127.0.0.1:{first['port']}"
        with httpx.Client(base_url=base, timeout=30) as client:
            created = client.post("/downloads", json={"url": url}).json()
            ids, names = [], []
            with connect_sse(client, "GET", f"/downloads/{created['id']}/progress") as source:
                assert source.response.headers["content-type"].startswith("text/event-stream")
                for event in source.iter_sse():
                    data = json.loads(event.data)
                    assert data["id"] == created["id"], data
                    ids.append(int(event.id))
                    names.append(event.event)
            assert names and names[-1] == "completed", names
            assert ids == sorted(set(ids)), ids
            assert set(names) <= {"progress", "resumed", "paused", "completed"}, names
            print(f"httpx-sse: {len(names)} events, last {names[-1]}")

            curl = subprocess.run(["curl", "-sS", "-N", "--max-time", "30", f"{base}/downloads/{created['id']}/progress"],
                                  capture_output=True, text=True, check=True)
            assert "event: completed\n" in curl.stdout and curl.stdout.endswith("\n\n"), curl.stdout
            print("curl -N: stream ended after the completed event")
        return 0
    except BaseException:
        if expired.is_set():
            print(f"sse-clients-check: gave up after {DEADLINE_SECONDS} s; the service was killed", file=sys.stderr)
        raise
    finally:
        watchdog.cancel()
        service.terminate()
        try:
            service.wait(timeout=30)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()
        origin.shutdown()


if __name__ == "__main__":
    sys.exit(main())
