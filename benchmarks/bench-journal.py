#!/usr/bin/env python3
"""Grows a state journal written by the service itself to COUNT recorded downloads (scripts/bench, item 7).

The format is the one documented at the top of Sources/DownloaderEngine/Storage/StateJournal.swift:
{"version": 1, "downloads": [entry, ...]}, unknown keys ignored. Entries are cloned from ones the
service wrote, so new fields come along by themselves; only id, url, file fields and offsets change.

The seed journal must hold at least one completed, one paused and one failed download, written by
the real service (so the field names and encodings are whatever the current StateJournal writes).
Each clone gets a fresh id and URL and real files where the service checks them: completed entries a
small file in their area (size and SHA-256 recorded), paused ones a partial of their recorded offset.
Mix: 80 % completed, 10 % paused, 10 % failed (at most 900, below the 1 000 failed ones the engine keeps).

usage: bench-journal.py STATE_DIR COUNT URL_PREFIX
Prints {"completed": n, "paused": n, "failed": n} and rewrites STATE_DIR/journal.json.
"""
import hashlib
import json
import os
import sys


def main():
    state_dir, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    path = os.path.join(state_dir, "journal.json")
    with open(path) as f:
        doc = json.load(f)
    entries = doc.get("downloads") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        sys.exit(f"bench-journal: {path} is not a JSON document with a downloads list; the journal format "
                 "changed, update benchmarks/bench-journal.py")
    templates = {}
    for e in entries:
        templates.setdefault(e.get("state"), e)
    missing = [s for s in ("completed", "paused", "failed") if s not in templates]
    if missing:
        sys.exit(f"bench-journal: the seed journal has no {', '.join(missing)} download")
    partials = os.path.join(state_dir, "partials")
    seed_partial = os.path.join(partials, templates["paused"]["id"] + ".part")
    with open(seed_partial, "rb") as f:
        partial_bytes = f.read(4096)
    if not partial_bytes:
        sys.exit("bench-journal: the seed paused download kept no bytes")

    failed_n = min(count // 10, 900)
    paused_n = count // 10
    completed_n = count - failed_n - paused_n
    plan = ["completed"] * completed_n + ["paused"] * paused_n + ["failed"] * failed_n
    out = []
    for n, state in enumerate(plan):
        e = dict(templates[state])
        e.pop("tokens", None)  # caller tokens (journaled by newer builds) belong to the seed only
        new_id = f"{0xbe00000000000000 + n:016x}"
        e["id"] = new_id
        e["url"] = f"{prefix}{n}"
        if state == "completed":
            content = f"bench file {n}\n".encode() * 64
            area = os.path.dirname(templates["completed"]["finalPath"])
            name = templates["completed"].get("fileName") or "file"
            final = os.path.join(area, f"{new_id}-{name}")
            with open(final, "wb") as f:
                f.write(content)
            e["finalPath"] = final
            e["sha256"] = hashlib.sha256(content).hexdigest()
            e["size"] = len(content)
            if "expectedTotal" in e:
                e["expectedTotal"] = len(content)
            if "verifiedOffset" in e:
                e["verifiedOffset"] = len(content)
        elif state == "paused":
            with open(os.path.join(partials, new_id + ".part"), "wb") as f:
                f.write(partial_bytes)
            e["verifiedOffset"] = len(partial_bytes)
        out.append(e)
    doc["downloads"] = out
    tmp = path + ".bench-tmp"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(doc, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)
    print(json.dumps({"completed": completed_n, "paused": paused_n, "failed": failed_n}))


if __name__ == "__main__":
    main()
