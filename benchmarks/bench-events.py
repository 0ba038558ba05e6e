#!/usr/bin/env python3
"""GET /events under load (scripts/bench section 10): N downloads kept live by a trickling origin,
W watchers on /events. Once every watcher has its snapshot, counts for WINDOW seconds the events
the watchers get (progress per second in all, against the shared budget of 5 000 a second;
lifecycle events) and the service's CPU. Also the service's CPU while the snapshots go out, how long
its threads waited for a CPU meanwhile (run-queue wait from /proc/PID/task/*/schedstat, summed over
threads: on a loaded machine it, not the service's work, sets the snapshot's wall time), and its
peak RSS. Prints one JSON object.

usage: bench-events.py --port P --pid PID --url URL --downloads N --watchers W --window S
"""
import argparse
import asyncio
import json
import os
import time

HOST = "127.0.0.1"


def runqueue_wait_seconds(pid):
    """Time the process's threads spent runnable but waiting for a CPU, summed (0 when unknown)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[1])
            except (OSError, IndexError, ValueError):
                pass
    except OSError:
        return 0.0
    return total / 1e9


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def call(port, method, path, body=None):
    reader, writer = await asyncio.open_connection(HOST, port)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    writer.write(head.encode() + b"\r\n" + data)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    head, _, rest = raw.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in head.lower():
        out = b""
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, rest = out + rest[:size], rest[size + 2:]
        rest = out
    return status, (json.loads(rest) if rest else None)


async def count_listed(port, query=""):
    """How many downloads `GET /downloads` lists, over all its pages (1 000 a page)."""
    total, path = 0, "/downloads" + ("?" + query if query else "")
    for _ in range(1_000):
        _, page = await call(port, "GET", path)
        total += len(page["downloads"])
        if "next" not in page:
            break
        path = "/downloads?" + (query + "&" if query else "") + "after=" + page["next"]
    return total


class Watcher:
    def __init__(self):
        self.snapshots = 0
        self.progress = 0
        self.lifecycle = 0
        self.last_id = 0
        self.ids_increasing = True
        self.downloads = set()
        self.error = None


async def watch(port, w, counting):
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
        writer.write(f"GET /events HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            w.error = head.split(b"\r\n", 1)[0].decode()
            return
        pending = b""
        while True:
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return
            pending += (await reader.readexactly(size + 2))[:-2]
            while b"\n\n" in pending:
                block, pending = pending.split(b"\n\n", 1)
                name, event_id = None, None
                for line in block.split(b"\n"):
                    if line.startswith(b"event: "):
                        name = line[7:]
                    elif line.startswith(b"id: "):
                        event_id = int(line[4:])
                if event_id is not None:
                    if event_id <= w.last_id:
                        w.ids_increasing = False
                    w.last_id = event_id
                if name == b"snapshot":
                    w.snapshots += 1
                elif not counting[0]:
                    continue
                elif name == b"progress":
                    w.progress += 1
                    data = block.split(b"\ndata: ", 1)[1]
                    w.downloads.add(json.loads(data)["id"])
                elif name is not None:
                    w.lifecycle += 1
    except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
        return


async def main_async(args):
    sem = asyncio.Semaphore(100)

    async def ask(i):
        async with sem:
            status, _ = await call(args.port, "POST", "/downloads", {"url": f"{args.url}?ev{i}"})
            return status

    statuses = await asyncio.gather(*(ask(i) for i in range(args.downloads)))
    accepted = sum(1 for s in statuses if s in (200, 202))
    deadline = time.monotonic() + 60
    live = 0
    while time.monotonic() < deadline:
        live = await count_listed(args.port, "state=downloading")
        if live >= accepted:
            break
        await asyncio.sleep(0.5)
    total = await count_listed(args.port)

    counting = [False]
    watchers = [Watcher() for _ in range(args.watchers)]
    snap_cpu0, snap_wait0 = cpu_seconds(args.pid), runqueue_wait_seconds(args.pid)
    t0 = time.monotonic()
    tasks = [asyncio.create_task(watch(args.port, w, counting)) for w in watchers]
    while time.monotonic() - t0 < 60 and any(w.snapshots < total and w.error is None for w in watchers):
        await asyncio.sleep(0.05)
    snapshot_s = time.monotonic() - t0
    snapshot_cpu = cpu_seconds(args.pid) - snap_cpu0
    snapshot_wait = runqueue_wait_seconds(args.pid) - snap_wait0
    cpu0, t1 = cpu_seconds(args.pid), time.monotonic()
    counting[0] = True
    await asyncio.sleep(args.window)
    counting[0] = False
    elapsed, cpu = time.monotonic() - t1, cpu_seconds(args.pid) - cpu0
    live_after = await count_listed(args.port, "state=downloading")
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    progress = sum(w.progress for w in watchers)
    return {
        "downloads_asked": args.downloads, "accepted": accepted, "live_before": live, "live_after": live_after,
        "watchers": args.watchers, "watchers_refused": sum(1 for w in watchers if w.error),
        "snapshot_s": round(snapshot_s, 3), "snapshot_cpu_s": round(snapshot_cpu, 3),
        "snapshot_runqueue_wait_s": round(snapshot_wait, 2), "window_s": round(elapsed, 3),
        "progress_per_s": round(progress / elapsed, 1),
        "progress_per_watcher_per_s": round(progress / elapsed / max(1, args.watchers), 2),
        "distinct_downloads_per_watcher": round(sum(len(w.downloads) for w in watchers) / max(1, args.watchers), 1),
        "lifecycle": sum(w.lifecycle for w in watchers),
        "ids_increasing": all(w.ids_increasing for w in watchers),
        "cpu_s": round(cpu, 3), "cpu_percent": round(100 * cpu / elapsed, 1),
        "peak_rss_kib": peak_rss_kib(args.pid),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--downloads", type=int, default=1000)
    p.add_argument("--watchers", type=int, default=100)
    p.add_argument("--window", type=float, default=10)
    print(json.dumps(asyncio.run(main_async(p.parse_args()))))


if __name__ == "__main__":
    main()
