#!/usr/bin/env python3
"""Grows a state area written by the service itself to COUNT recorded downloads (scripts/bench,
items 7 and 8).

Two formats, whichever the seed holds (so a binary from before the SQLite state can be measured the
same way):
  state.db      the SQLite database (Sources/DownloaderEngine/State/SQLiteSchema.swift); rows are
                cloned column by column, so columns added later come along by themselves
  journal.json  the JSON journal of earlier releases: {"version": 1, "downloads": [entry, ...]}

The seed must hold at least one completed, one paused and one failed download, written by the real
service. Each clone gets a fresh id and URL and real files where the service checks them: completed
ones a small file in their area (size and SHA-256 recorded), paused ones a partial of their recorded
offset. The areas are the state directory's siblings (DIR/state, DIR/cache, DIR/data), so a seed
copied elsewhere grows in place. Mix: 10 % paused, 10 % failed (at most 900, below the 1 000 failed
ones the engine keeps; FAILED sets another count), the rest completed. Callers' tokens belong to the
seed only and are dropped.

usage: bench-state.py STATE_DIR COUNT URL_PREFIX [FAILED]
Prints {"format": ..., "completed": n, "paused": n, "failed": n}.
"""
import hashlib
import json
import os
import sqlite3
import sys


def plan(count, failed=None):
    failed_n = min(count // 10, 900) if failed is None else failed
    paused_n = count // 10
    completed_n = count - failed_n - paused_n
    return ["completed"] * completed_n + ["paused"] * paused_n + ["failed"] * failed_n


def clone_files(state_dir, n, state, new_id, final_path, partial_bytes):
    """Creates the clone's file; returns (final_path, sha256, size) for completed ones."""
    if state == "completed":
        content = f"bench file {n}\n".encode() * 64
        root = os.path.dirname(os.path.abspath(state_dir))
        area = os.path.join(root, os.path.basename(os.path.dirname(final_path)))
        name = os.path.basename(final_path).split("-", 1)[1] if "-" in os.path.basename(final_path) else "file"
        final = os.path.join(area, f"{new_id}-{name}")
        with open(final, "wb") as f:
            f.write(content)
        return final, hashlib.sha256(content).hexdigest(), len(content)
    if state == "paused":
        with open(os.path.join(state_dir, "partials", new_id + ".part"), "wb") as f:
            f.write(partial_bytes)
    return None


def seed_partial(state_dir, paused_id):
    with open(os.path.join(state_dir, "partials", paused_id + ".part"), "rb") as f:
        data = f.read(4096)
    if not data:
        sys.exit("bench-state: the seed paused download kept no bytes")
    return data


def grow_database(state_dir, count, prefix, failed):
    db = sqlite3.connect(os.path.join(state_dir, "state.db"))
    db.row_factory = sqlite3.Row
    templates = {}
    for state in ("completed", "paused", "failed"):
        row = db.execute("SELECT * FROM downloads WHERE state = ? ORDER BY row LIMIT 1", (state,)).fetchone()
        if row is None:
            sys.exit(f"bench-state: the seed database has no {state} download")
        templates[state] = dict(row)
    partial = seed_partial(state_dir, templates["paused"]["id"])
    columns = list(templates["completed"].keys())
    insert = f"INSERT INTO downloads ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"
    with db:
        db.execute("DELETE FROM tokens")
        db.execute("DELETE FROM downloads")
        for n, state in enumerate(plan(count, failed)):
            r = dict(templates[state])
            r["row"] = n + 1
            r["id"] = f"{0xbe00000000000000 + n:016x}"
            r["url"] = f"{prefix}{n}"
            made = clone_files(state_dir, n, state, r["id"], templates["completed"]["final_path"], partial)
            if made:
                r["final_path"], r["sha256"], r["size"] = made
                r["expected_total"] = r["size"]
            elif state == "paused":
                r["verified_offset"] = len(partial)
            db.execute(insert, [r[c] for c in columns])
    db.close()


def grow_journal(state_dir, count, prefix, failed):
    path = os.path.join(state_dir, "journal.json")
    with open(path) as f:
        doc = json.load(f)
    entries = doc.get("downloads") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        sys.exit(f"bench-state: {path} is not a JSON document with a downloads list")
    templates = {}
    for e in entries:
        templates.setdefault(e.get("state"), e)
    missing = [s for s in ("completed", "paused", "failed") if s not in templates]
    if missing:
        sys.exit(f"bench-state: the seed journal has no {', '.join(missing)} download")
    partial = seed_partial(state_dir, templates["paused"]["id"])
    out = []
    for n, state in enumerate(plan(count, failed)):
        e = dict(templates[state])
        e.pop("tokens", None)
        e["id"] = f"{0xbe00000000000000 + n:016x}"
        e["url"] = f"{prefix}{n}"
        made = clone_files(state_dir, n, state, e["id"], templates["completed"]["finalPath"], partial)
        if made:
            e["finalPath"], e["sha256"], e["size"] = made
            if "expectedTotal" in e:
                e["expectedTotal"] = e["size"]
            if "verifiedOffset" in e:
                e["verifiedOffset"] = e["size"]
        elif state == "paused":
            e["verifiedOffset"] = len(partial)
        out.append(e)
    doc["downloads"] = out
    tmp = path + ".bench-tmp"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(doc, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def main():
    state_dir, count, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    failed = int(sys.argv[4]) if len(sys.argv) > 4 else None
    if os.path.exists(os.path.join(state_dir, "state.db")):
        grow_database(state_dir, count, prefix, failed)
        kind = "state.db"
    elif os.path.exists(os.path.join(state_dir, "journal.json")):
        grow_journal(state_dir, count, prefix, failed)
        kind = "journal.json"
    else:
        sys.exit(f"bench-state: {state_dir} holds neither state.db nor journal.json")
    mix = plan(count, failed)
    print(json.dumps({"format": kind, "completed": mix.count("completed"), "paused": mix.count("paused"),
                      "failed": mix.count("failed")}))


if __name__ == "__main__":
    main()
