#!/usr/bin/env python3
"""Load generators for scripts/bench (stdlib only, loopback only, every wait bounded).

Subcommands print one JSON object on stdout:
  coalesce      N clients POST the same URL at once, each follows its SSE stream to `completed`
  proxy-get     N clients GET one URL at once through an HTTP proxy (Squid, Varnish) or from the
                service's /fetch, reading (and optionally hashing) every byte
  pause-resume  one download paused at given fractions and resumed each time, until completed
  fanout        N SSE subscribers on one paused download, then resumed: RSS per subscriber, CPU,
                fetch time and how late events reach the slowest subscriber
  state-writes  N POSTs (distinct URLs, or one URL: coalesced) over a few keep-alive connections:
                bytes the service wrote (/proc/PID/io write_bytes) until its writes settle
  startup       start-up time of the service until /healthz answers
"""
import argparse
import asyncio
import hashlib
import json
import os
import select
import socket
import statistics
import sys
import time

HOST = "127.0.0.1"


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(q / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


# ---------------------------------------------------------------- a tiny HTTP/1.1 client (asyncio)

class HTTPError(Exception):
    pass


async def read_head(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def body_chunks(reader, headers, chunk=262144):
    """Yields the body as it arrives: Content-Length, chunked, or until close."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return
            left = size
            while left:
                data = await reader.read(min(left, chunk))
                if not data:
                    raise HTTPError("connection closed inside a chunk")
                left -= len(data)
                yield data
            await reader.readexactly(2)
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left:
            data = await reader.read(min(left, chunk))
            if not data:
                raise HTTPError("connection closed inside the body")
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(chunk)
            if not data:
                return
            yield data


async def read_body(reader, headers):
    parts = []
    async for data in body_chunks(reader, headers):
        parts.append(data)
    return b"".join(parts)


def request_bytes(method, path, body=None, host=HOST):
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + (body or b"")


async def call(port, method, path, body=None):
    """One request on a fresh connection; returns (status, parsed JSON or text)."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(request_bytes(method, path, body))
        await writer.drain()
        status, headers = await read_head(reader)
        data = await read_body(reader, headers)
    finally:
        writer.close()
    try:
        return status, json.loads(data)
    except ValueError:
        return status, data.decode("utf-8", "replace")


async def gated_clients(count, port, timeout, exchange, limit=1 << 16):
    """Opens `count` connections to `port` (a list of ports: client i to the i-th modulo, e.g. the
    replicas of a cluster) first, then releases them all at once: each runs
    `exchange(reader, writer, rec, started)`, `started` being the moment of the release, and fills
    its record `rec` ({"ok": False} until it says otherwise). Returns the records and how many
    clients were still running after `timeout` (cancelled)."""
    gate = asyncio.Event()
    all_connected = asyncio.Event()
    connected = 0
    released = {}
    results = []

    def arrived():
        nonlocal connected
        connected += 1
        if connected == count:
            all_connected.set()

    ports = port if isinstance(port, list) else [port]

    async def client(index):
        rec = {"ok": False}
        try:
            reader, writer = await asyncio.open_connection(HOST, ports[index % len(ports)], limit=limit)
        except OSError as e:
            rec["error"] = f"connect: {e}"
            results.append(rec)
            arrived()
            return
        arrived()
        try:
            await gate.wait()
            await exchange(reader, writer, rec, released["at"])
        except Exception as e:  # noqa: BLE001 - every failure is reported, none hidden
            rec["error"] = f"{type(e).__name__}: {e}"
        finally:
            writer.close()
            results.append(rec)

    tasks = [asyncio.create_task(client(i)) for i in range(count)]
    await asyncio.wait_for(all_connected.wait(), timeout)
    released["at"] = time.monotonic()
    gate.set()
    _, pending = await asyncio.wait(tasks, timeout=timeout)
    for t in pending:
        t.cancel()
    return results, len(pending)


# ---------------------------------------------------------------- coalesce

async def coalesce(args):
    body = json.dumps({"url": args.url}).encode()

    async def exchange(reader, writer, rec, started):
        t0 = time.monotonic()
        writer.write(request_bytes("POST", "/downloads", body))
        await writer.drain()
        status, headers = await read_head(reader)
        answer = json.loads(await read_body(reader, headers))
        rec["post_s"] = time.monotonic() - t0
        rec["status"] = status
        if status not in (200, 202):
            rec["error"] = f"POST answered {status}: {answer}"
            return
        rec["id"] = answer["id"]
        rec["coalesced"] = answer.get("coalesced")
        writer.write(request_bytes("GET", f"/downloads/{answer['id']}/progress"))
        await writer.drain()
        status, headers = await read_head(reader)
        if status != 200:
            rec["error"] = f"progress answered {status}"
            return
        tail = b""
        async for data in body_chunks(reader, headers, 65536):
            tail = (tail + data)[-4096:]
            if b"event: completed" in tail:
                rec["completed_s"] = time.monotonic() - started
                rec["ok"] = True
                break
            if b"event: failed" in tail:
                rec["error"] = "download failed: " + tail.decode("utf-8", "replace")[-300:]
                break
        else:
            rec["error"] = "progress stream ended before completed"
        if rec["ok"] and args.fetch_file:
            # Like a Squid client, end with the whole file: GET /file on a new connection.
            rec["ok"] = False
            r2, w2 = await asyncio.open_connection(HOST, args.port[0], limit=1 << 20)
            try:
                w2.write(request_bytes("GET", f"/downloads/{answer['id']}/file"))
                await w2.drain()
                status, headers = await read_head(r2)
                got = 0
                async for data in body_chunks(r2, headers):
                    got += len(data)
            finally:
                w2.close()
            if status != 200 or (args.size and got != args.size):
                rec["error"] = f"file answered {status} with {got} bytes"
            else:
                rec["ok"] = True
                rec["file_s"] = time.monotonic() - started

    results, pending = await gated_clients(args.clients, args.port, args.timeout, exchange)
    posts = [r["post_s"] for r in results if "post_s" in r]
    completed = [r["completed_s"] for r in results if r.get("ok")]
    files = [r["file_s"] for r in results if r.get("ok") and "file_s" in r]
    errors = [r.get("error", "timed out") for r in results if not r.get("ok")] + ["timed out"] * pending
    ids = {r["id"] for r in results if "id" in r}
    return {
        "clients": args.clients,
        "ok": len(completed),
        "errors": len(errors),
        "first_errors": errors[:3],
        "distinct_ids": len(ids),
        "post_p50_ms": 1000 * percentile(posts, 50) if posts else None,
        "post_p99_ms": 1000 * percentile(posts, 99) if posts else None,
        "last_completed_s": max(completed) if completed else None,
        "last_file_s": max(files) if files else None,
    }


# ---------------------------------------------------------------- proxy-get (Squid, Varnish, /fetch)

async def proxy_get(args):
    """N clients GET one object at once: from a proxy (absolute-form target, the default) or from the
    service's `/fetch` (`--path`). Each body is counted and, with `--sha256`, hashed."""
    target = args.path or args.url
    host = "127.0.0.1" if args.path else args.url.split("/")[2]
    req = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()

    async def exchange(reader, writer, rec, started):
        t0 = time.monotonic()
        writer.write(req)
        await writer.drain()
        status, headers = await read_head(reader)
        rec["head_s"] = time.monotonic() - t0
        got = 0
        digest = hashlib.sha256() if args.sha256 else None
        async for data in body_chunks(reader, headers):
            if got == 0 and data:
                rec["first_s"] = time.monotonic() - t0
            got += len(data)
            if digest:
                digest.update(data)
        if status != 200 or got != args.size:
            rec["error"] = f"status {status}, {got} of {args.size} bytes"
        elif digest and digest.hexdigest() != args.sha256:
            rec["error"] = "body differs from the origin's file (SHA-256)"
        else:
            rec["ok"] = True
            rec["done_s"] = time.monotonic() - started
            rec["cache"] = headers.get("x-cache", "")

    port = args.port or args.proxy_port
    if args.discard:
        results, pending = proxy_get_discard(args)
    else:
        results, pending = await gated_clients(args.clients, port, args.timeout, exchange, limit=1 << 20)
    heads = [r["head_s"] for r in results if "head_s" in r]
    firsts = [r["first_s"] for r in results if "first_s" in r]
    finished = [r["done_s"] for r in results if r.get("ok")]
    errors = [r.get("error") for r in results if not r.get("ok")] + ["timed out"] * pending
    return {
        "clients": args.clients,
        "ok": len(finished),
        "errors": len(errors),
        "first_errors": errors[:3],
        "head_p50_ms": 1000 * percentile(heads, 50) if heads else None,
        "head_p99_ms": 1000 * percentile(heads, 99) if heads else None,
        "first_byte_p50_ms": 1000 * percentile(firsts, 50) if firsts else None,
        "first_byte_p99_ms": 1000 * percentile(firsts, 99) if firsts else None,
        "last_done_s": max(finished) if finished else None,
    }


class Reader:
    __slots__ = ("sock", "state", "head", "got", "length", "rec")

    def __init__(self, sock):
        self.sock = sock
        self.state = "connecting"
        self.head = b""
        self.got = 0
        self.length = None
        self.rec = {"ok": False}


def proxy_get_discard(args):
    """proxy-get with `--discard`: the same clients, requests and figures, but each body is counted
    and dropped in the kernel (recv with MSG_TRUNC: no copy into this process, no hash), on one epoll
    loop. For measuring what N readers cost the server (its fetch's speed), not the bodies: a client
    on this machine that copies and hashes every byte takes the CPU the server is being measured on.
    Content-Length bodies only (anything else is an error)."""
    target = args.path or args.url
    host = "127.0.0.1" if args.path else args.url.split("/")[2]
    request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
    port = args.port or args.proxy_port
    ep = select.epoll()
    readers = {}
    sink = memoryview(bytearray(1 << 20))
    deadline = time.monotonic() + args.timeout
    for _ in range(args.clients):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((HOST, port))
        except BlockingIOError:
            pass
        r = Reader(s)
        readers[s.fileno()] = r
        ep.register(s.fileno(), select.EPOLLOUT)
    connecting = len(readers)
    while connecting and time.monotonic() < deadline:  # every connection open before the release
        for fd, mask in ep.poll(0.5, 4096):
            r = readers[fd]
            if r.state == "connecting":
                r.state = "connected" if not mask & (select.EPOLLERR | select.EPOLLHUP) else "dead"
                if r.state == "dead":
                    r.rec["error"] = "connect failed"
                    ep.unregister(fd)
                else:
                    ep.modify(fd, 0)
                connecting -= 1
    started = time.monotonic()
    for fd, r in readers.items():
        if r.state != "connected":
            continue
        r.rec["t0"] = time.monotonic()
        try:
            r.sock.send(request)
        except OSError as e:
            r.state, r.rec["error"] = "dead", f"send: {e}"
            continue
        r.state = "head"
        ep.modify(fd, select.EPOLLIN)
    live = sum(1 for r in readers.values() if r.state == "head")

    def end(fd, r, error=None):
        nonlocal live
        now = time.monotonic()
        if error:
            r.rec["error"] = error
        elif r.got != args.size:
            r.rec["error"] = f"status {r.rec.get('status')}, {r.got} of {args.size} bytes"
        else:
            r.rec["ok"], r.rec["done_s"] = True, now - started
        r.state = "dead"
        ep.unregister(fd)
        live -= 1

    while live and time.monotonic() < deadline:
        for fd, _ in ep.poll(0.5, 4096):
            r = readers[fd]
            if r.state == "dead":
                continue
            try:
                if r.state == "head":
                    data = r.sock.recv(65536)
                    n = 0
                    if data:
                        r.head += data
                        k = r.head.find(b"\r\n\r\n")
                        if k >= 0:
                            now = time.monotonic()
                            r.rec["head_s"] = now - r.rec["t0"]
                            lines = r.head[:k].decode("latin-1").split("\r\n")
                            r.rec["status"] = int(lines[0].split(" ", 2)[1])
                            fields = dict((a.strip().lower(), b.strip()) for a, _, b in (x.partition(":") for x in lines[1:]))
                            if r.rec["status"] != 200 or "content-length" not in fields:
                                end(fd, r, f"status {r.rec['status']}, not a 200 with Content-Length")
                                continue
                            r.length = int(fields["content-length"])
                            n = len(r.head) - k - 4
                            r.head = b""
                            r.state = "body"
                    elif not data:
                        end(fd, r, "closed before the head")
                        continue
                else:
                    n = r.sock.recv_into(sink, len(sink), socket.MSG_TRUNC)
                    if n == 0:
                        end(fd, r, None if r.got == r.length else "closed inside the body")
                        continue
            except BlockingIOError:
                continue
            except OSError as e:
                end(fd, r, f"recv: {e}")
                continue
            if n and r.got == 0:
                r.rec["first_s"] = time.monotonic() - r.rec["t0"]
            r.got += n
            if r.state == "body" and r.got >= r.length:
                end(fd, r)
    pending = live
    for r in readers.values():
        r.sock.close()
    return [r.rec for r in readers.values() if r.rec.get("ok") or "error" in r.rec], pending


# ---------------------------------------------------------------- pause-resume

async def pause_resume(args):
    body = json.dumps({"url": args.url}).encode()
    fractions = [float(f) for f in args.at.split(",") if f]
    status, answer = await call(args.port, "POST", "/downloads", body)
    if status not in (200, 202):
        raise SystemExit(f"POST answered {status}: {answer}")
    did, token = answer["id"], answer["token"]
    reader, writer = await asyncio.open_connection(HOST, args.port)
    writer.write(request_bytes("GET", f"/downloads/{did}/progress"))
    await writer.drain()
    status, headers = await read_head(reader)
    if status != 200:
        raise SystemExit(f"progress answered {status}")
    pauses = []
    trace = []
    buf = b""
    waiting_pause = False
    completed = False
    async for data in body_chunks(reader, headers, 65536):
        buf += data
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            name, payload = None, None
            for line in event.split(b"\n"):
                if line.startswith(b"event: "):
                    name = line[7:].decode()
                elif line.startswith(b"data: "):
                    payload = json.loads(line[6:])
            if len(trace) < 400:
                trace.append((name, payload.get("fraction") if isinstance(payload, dict) else None,
                              payload.get("state") if isinstance(payload, dict) else None))
            if name == "completed":
                completed = True
                break
            if name == "failed":
                raise SystemExit(f"download failed: {payload}")
            if name == "paused" and waiting_pause:
                waiting_pause = False
                status, answer = await call(args.port, "POST", "/downloads", body)
                if status not in (200, 202):
                    raise SystemExit(f"resume POST answered {status}: {answer}")
                token = answer["token"]
                continue
            if (name == "progress" and not waiting_pause and fractions and payload
                    and (payload.get("fraction") or 0) >= fractions[0]):
                fractions.pop(0)
                pauses.append(payload["fraction"])
                status, _ = await call(args.port, "DELETE", f"/downloads/{token}")
                if status != 200:
                    raise SystemExit(f"DELETE answered {status}")
                waiting_pause = True
        if completed:
            break
    writer.close()
    status, metrics = await call(args.port, "GET", "/metrics")
    fetched = None
    for line in str(metrics).splitlines():
        if line.startswith("download_service_bytes_fetched_total"):
            fetched = int(line.split()[1])
    return {"completed": completed, "paused_at": pauses, "bytes_fetched": fetched, "size": args.size,
            "trace": trace if args.trace else None}


# ---------------------------------------------------------------- fanout (raw epoll: 10 000 sockets)

class Subscriber:
    __slots__ = ("sock", "state", "tail", "first_event", "completed_at", "seen")

    def __init__(self, sock):
        self.sock = sock
        self.state = "connecting"
        self.tail = b""
        self.first_event = False
        self.completed_at = None
        self.seen = []  # (bytesWritten, arrival)


def post_and_pause(port, url):
    """POSTs url and at once withdraws the only token: (id, snapshot) once the download is paused."""
    body = json.dumps({"url": url}).encode()
    status, answer = asyncio.run(call(port, "POST", "/downloads", body))
    if status not in (200, 202):
        raise SystemExit(f"POST answered {status}: {answer}")
    did, token = answer["id"], answer["token"]
    asyncio.run(call(port, "DELETE", f"/downloads/{token}"))
    deadline = time.monotonic() + 10
    while True:
        status, snap = asyncio.run(call(port, "GET", f"/downloads/{did}"))
        if snap.get("state") in ("paused", "completed") or time.monotonic() > deadline:
            return did, snap
        time.sleep(0.02)


def fanout(args):
    for attempt in range(3):  # a small file on a fast machine may be (nearly) done before the DELETE lands
        url = args.url + (f"-again{attempt}" if attempt else "")
        did, snap = post_and_pause(args.port, url)
        if snap.get("state") == "paused" and snap.get("bytesWritten", 0) < args.size // 2:
            break  # paused with most of the fetch still to come
    else:
        raise SystemExit(f"download did not pause (state {snap.get('state')}); use a larger file")
    body = json.dumps({"url": url}).encode()
    paused_bytes = snap["bytesWritten"]
    time.sleep(0.3)
    rss0 = proc_status_kib(args.pid, "VmRSS")

    ep = select.epoll()
    subs = {}
    request = request_bytes("GET", f"/downloads/{did}/progress")
    refused = 0
    t_connect = time.monotonic()
    for i in range(args.subscribers):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect((HOST, args.port))
        except BlockingIOError:
            pass
        except OSError:
            refused += 1
            s.close()
            continue
        sub = Subscriber(s)
        subs[s.fileno()] = sub
        ep.register(s.fileno(), select.EPOLLOUT)
        # At most WINDOW subscribers still waiting for their first event: opening all 10 000 at once
        # overflows the listen backlog, and dropped SYNs come back only after 1, 3, 7, 15 s...
        while i + 1 - refused - ATTACHED[0] >= WINDOW and time.monotonic() - t_connect < args.timeout / 2:
            pump(ep, subs, request, 0.05)
    waiting = lambda: sum(1 for s in subs.values() if not s.first_event and s.state != "dead")  # noqa: E731
    deadline = time.monotonic() + args.timeout / 2
    while waiting() and time.monotonic() < deadline:
        pump(ep, subs, request, 0.2)
    connect_s = time.monotonic() - t_connect
    attached = sum(1 for s in subs.values() if s.first_event)
    time.sleep(1.0)
    pump(ep, subs, request, 0.0)
    rss1 = proc_status_kib(args.pid, "VmRSS")

    for s in subs.values():
        s.seen = []  # lags are measured on the events of the running fetch only
    cpu0 = proc_cpu_seconds(args.pid)
    own0 = time.process_time()
    t0 = time.monotonic()
    status, answer = asyncio.run(call(args.port, "POST", "/downloads", body))
    if status not in (200, 202):
        raise SystemExit(f"resume POST answered {status}: {answer}")
    cpu_at_complete = None
    first_completed = None
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        pump(ep, subs, request, 0.2)
        if first_completed is None:
            done = [s.completed_at for s in subs.values() if s.completed_at]
            if done:
                first_completed = min(done)
                cpu_at_complete = proc_cpu_seconds(args.pid)
        if all(s.completed_at or s.state == "dead" for s in subs.values()):
            break
    if cpu_at_complete is None:
        cpu_at_complete = proc_cpu_seconds(args.pid)
    own_cpu = time.process_time() - own0
    cpu_all = proc_cpu_seconds(args.pid) - cpu0
    completed = [s.completed_at for s in subs.values() if s.completed_at]
    first_seen = {}
    for s in subs.values():
        for bw, t in s.seen:
            if bw not in first_seen or t < first_seen[bw]:
                first_seen[bw] = t
    lags = [t - first_seen[bw] for s in subs.values() for bw, t in s.seen]
    for s in subs.values():
        s.sock.close()
    fetch_s = (first_completed - t0) if first_completed else None
    return {
        "subscribers": args.subscribers,
        "attached": attached,
        "refused_or_dead": refused + sum(1 for s in subs.values() if s.state == "dead"),
        "connect_s": connect_s,
        "rss_before_kib": rss0,
        "rss_attached_kib": rss1,
        "rss_per_subscriber_kib": (rss1 - rss0) / attached if attached else None,
        "resumed_from": paused_bytes,
        "fetch_s": fetch_s,
        "fetch_mb_s": (args.size - paused_bytes) / fetch_s / 1e6 if fetch_s else None,
        "cpu_s": cpu_at_complete - cpu0,
        "cpu_until_all_s": cpu_all,
        "client_cpu_s": own_cpu,
        "completed": len(completed),
        "completed_spread_ms": 1000 * (max(completed) - min(completed)) if completed else None,
        "progress_lag_p99_ms": 1000 * percentile(lags, 99) if lags else None,
        "progress_lag_max_ms": 1000 * max(lags) if lags else None,
        "vm_hwm_kib": proc_status_kib(args.pid, "VmHWM"),
    }


WINDOW = 256
ATTACHED = [0]  # subscribers that got their first event, or died: counted by pump


def die(ep, fd, sub):
    if not sub.first_event:
        ATTACHED[0] += 1
    sub.state = "dead"
    ep.unregister(fd)


def pump(ep, subs, request, timeout):
    """One epoll round: finish connects (send the request) and read whatever arrived."""
    now = None
    for fd, mask in ep.poll(timeout, 4096):
        sub = subs.get(fd)
        if sub is None:
            continue
        if sub.state == "connecting":
            if mask & (select.EPOLLERR | select.EPOLLHUP):
                die(ep, fd, sub)
                continue
            try:
                sub.sock.send(request)
            except OSError:
                die(ep, fd, sub)
                continue
            sub.state = "reading"
            ep.modify(fd, select.EPOLLIN)
            continue
        try:
            data = sub.sock.recv(65536)
        except BlockingIOError:
            continue
        except OSError:
            data = b""
        if now is None:
            now = time.monotonic()
        if not data:
            if sub.completed_at:
                ep.unregister(fd)
            else:
                die(ep, fd, sub)
            continue
        if sub.state == "reading":  # the first bytes carry the status line
            if not data.startswith(b"HTTP/1.1 200"):
                die(ep, fd, sub)
                continue
            sub.state = "streaming"
        chunk = sub.tail + data
        pos = 0
        while True:
            k = chunk.find(b'"bytesWritten":', pos)
            if k < 0:
                break
            end = k + 15
            while end < len(chunk) and chunk[end:end + 1].isdigit():
                end += 1
            if end >= len(chunk):
                break  # the number may continue in the next read
            sub.seen.append((int(chunk[k + 15:end]), now))
            if not sub.first_event:
                ATTACHED[0] += 1
            sub.first_event = True
            pos = end
        if not sub.completed_at and b"event: completed" in chunk:
            sub.completed_at = now
        sub.tail = chunk[max(pos, len(chunk) - 64):]
    return now


# ---------------------------------------------------------------- state-writes

def proc_write_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise SystemExit("state-writes: no write_bytes in /proc/PID/io")


async def state_writes(args):
    """POSTs `count` downloads over `connections` keep-alive connections: URL `url` every time
    (coalesced) or `url` + a running number (distinct). Then waits until the service's write_bytes
    has not moved for `settle` seconds (its state commits are batched and asynchronous) and reports
    the bytes written from the first POST until then."""
    before = proc_write_bytes(args.pid)
    t0 = time.monotonic()
    counter = iter(range(args.count))
    statuses = {}
    latencies = []

    async def connection():
        reader, writer = await asyncio.open_connection(HOST, args.port)
        try:
            for n in counter:
                url = args.url if args.coalesced else f"{args.url}{n}"
                t = time.monotonic()
                writer.write(request_bytes("POST", "/downloads", json.dumps({"url": url}).encode()))
                await writer.drain()
                status, headers = await read_head(reader)
                await read_body(reader, headers)
                latencies.append(time.monotonic() - t)
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    await asyncio.wait_for(asyncio.gather(*(connection() for _ in range(args.connections))), args.timeout)
    posted = time.monotonic() - t0
    last, still = proc_write_bytes(args.pid), time.monotonic()
    while time.monotonic() - t0 < args.timeout:
        await asyncio.sleep(0.1)
        now = proc_write_bytes(args.pid)
        if now != last:
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= args.settle:
            break
    return {
        "posts": args.count,
        "statuses": statuses,
        "post_s": posted,
        "post_p99_ms": 1000 * percentile(latencies, 99) if latencies else None,
        "settled_s": still - t0,
        "write_bytes": last - before,
    }


# ---------------------------------------------------------------- startup

def startup(args):
    """Starts the service command, times it until /healthz answers (the state is recovered before
    the server binds), checks GET /downloads lists the expected count, then stops it with SIGTERM."""
    import signal
    import subprocess
    import urllib.request

    def on_term(signum, frame):
        raise SystemExit(f"startup: signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    log = open(args.log, "ab")
    t0 = time.monotonic()
    proc = subprocess.Popen(args.command, stdout=subprocess.DEVNULL, stderr=log)
    try:
        base = f"http://{HOST}:{args.port}"
        ready = None
        while time.monotonic() - t0 < args.timeout and proc.poll() is None:
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        ready = time.monotonic() - t0
                        break
            except OSError:
                time.sleep(0.005)
        if ready is None:
            raise SystemExit(f"startup: the service did not answer within {args.timeout} s (exit {proc.poll()})")
        listed, page = 0, "/downloads"
        for _ in range(1_000):  # pages of 1 000 downloads
            with urllib.request.urlopen(base + page, timeout=60) as r:
                body = json.load(r)
            listed += len(body["downloads"])
            if "next" not in body:
                break
            page = "/downloads?after=" + body["next"]
        rss = proc_status_kib(proc.pid, "VmRSS")
        return {"ready_s": ready, "listed": listed, "rss_kib": rss}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("coalesce")
    c.add_argument("--port", type=lambda v: [int(p) for p in v.split(",")], required=True,
                   help="the service's port, or the ports of several replicas (comma-separated): clients spread over them")
    c.add_argument("--url", required=True)
    c.add_argument("--clients", type=int, default=1000)
    c.add_argument("--fetch-file", action="store_true", help="after completed, GET the file too")
    c.add_argument("--size", type=int, default=0, help="expected file size (with --fetch-file)")
    c.add_argument("--timeout", type=float, default=120)
    g = sub.add_parser("proxy-get")
    g.add_argument("--proxy-port", type=int)
    g.add_argument("--url", required=True)
    g.add_argument("--port", type=int, help="the service's port, with --path")
    g.add_argument("--path", help="request target on --port, e.g. /fetch?url=...; else --url through --proxy-port")
    g.add_argument("--sha256", help="the expected body's SHA-256 (hex)")
    g.add_argument("--discard", action="store_true",
                   help="count each body and drop it in the kernel (no copy, no hash): for the server's cost of N readers")
    g.add_argument("--size", type=int, required=True)
    g.add_argument("--clients", type=int, default=1000)
    g.add_argument("--timeout", type=float, default=120)
    r = sub.add_parser("pause-resume")
    r.add_argument("--port", type=int, required=True)
    r.add_argument("--url", required=True)
    r.add_argument("--size", type=int, required=True)
    r.add_argument("--at", default="0.3,0.6,0.9")
    r.add_argument("--timeout", type=float, default=120)
    r.add_argument("--trace", action="store_true", help="include the events seen in the output")
    f = sub.add_parser("fanout")
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--pid", type=int, required=True)
    f.add_argument("--url", required=True)
    f.add_argument("--size", type=int, required=True)
    f.add_argument("--subscribers", type=int, default=10000)
    f.add_argument("--timeout", type=float, default=120)
    w = sub.add_parser("state-writes")
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--url", required=True, help="the URL (--coalesced) or the prefix of distinct URLs")
    w.add_argument("--coalesced", action="store_true")
    w.add_argument("--count", type=int, default=1000)
    w.add_argument("--connections", type=int, default=8)
    w.add_argument("--settle", type=float, default=1.5)
    w.add_argument("--timeout", type=float, default=120)
    u = sub.add_parser("startup")
    u.add_argument("--port", type=int, required=True)
    u.add_argument("--log", required=True)
    u.add_argument("--timeout", type=float, default=60)
    u.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    if args.cmd == "startup" and args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.cmd == "coalesce":
        out = asyncio.run(coalesce(args))
    elif args.cmd == "proxy-get":
        out = asyncio.run(proxy_get(args))
    elif args.cmd == "pause-resume":
        out = asyncio.run(asyncio.wait_for(pause_resume(args), args.timeout))
    elif args.cmd == "startup":
        out = startup(args)
    elif args.cmd == "state-writes":
        out = asyncio.run(state_writes(args))
    else:
        out = fanout(args)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
