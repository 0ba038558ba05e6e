#!/usr/bin/env python3
"""Small helpers for scripts/bench: medians, JSON fields, and the final table.

  median V...            the median of the numbers given (empty values are skipped)
  get FILE KEY...        fields of a JSON object in FILE, one per line (missing: empty line)
  table ROWS.tsv         prints the table; exit status 1 when a section errored

ROWS.tsv lines: figure <TAB> ours <TAB> peer <TAB> unit <TAB> target
  ours/peer: numbers (or text, or empty); the ratio is ours/peer when both are numbers.
  target: `ratio>=X`, `ratio<=X`, `ours<X`, `ours<=X`, `ours==X`, `ours>=X`, or `-` (none set).
  A row whose ours is `ERROR` marks a failed section; peer then holds the reason.
"""
import json
import re
import statistics
import sys


def num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if unit == "x":  # a ratio of byte counts: small excesses matter
        return f"{v:.4f}"
    if v == 0:
        return "0"
    if float(v).is_integer() and abs(v) >= 1:
        return f"{int(v):,}".replace(",", " ")
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}".replace(",", " ")
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def met(target, ours, ratio):
    m = re.fullmatch(r"(ratio|ours)\s*(>=|<=|==|<|>)\s*([0-9.]+)", target)
    if not m:
        return "n/a"
    value = ratio if m.group(1) == "ratio" else ours
    if value is None:
        return "n/a"
    limit = float(m.group(3))
    ok = {">=": value >= limit, "<=": value <= limit, "==": abs(value - limit) < 1e-9,
          "<": value < limit, ">": value > limit}[m.group(2)]
    return "yes" if ok else "NO"


def table(path):
    rows, errors = [], 0
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 5:
                continue
            figure, ours_t, peer_t, unit, target = parts[:5]
            if ours_t == "ERROR":
                errors += 1
                rows.append((figure, "ERROR", peer_t, "", "", "", "ERROR"))
                continue
            ours, peer = num(ours_t), num(peer_t)
            ratio = ours / peer if ours is not None and peer not in (None, 0) else None
            unit_s = f" {unit}" if unit and unit != "-" else ""
            ours_s = (fmt(ours, unit) + unit_s) if ours is not None else (ours_t or "-")
            peer_s = (fmt(peer, unit) + unit_s) if peer is not None else (peer_t or "-")
            ratio_s = f"{ratio:.2f}x" if ratio is not None else "-"
            rows.append((figure, ours_s, peer_s, ratio_s, target if target != "-" else "-", "",
                         met(target, ours, ratio)))
    header = ("figure", "ours", "peer", "ratio", "target", "", "met")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(7)]
    out = []
    for r in [header] + rows:
        cells = [str(r[i]).ljust(widths[i]) for i in (0, 1, 2, 3, 4, 6)]
        out.append("| " + " | ".join(cells) + " |")
        if r is header:
            out.append("|" + "|".join("-" * (widths[i] + 2) for i in (0, 1, 2, 3, 4, 6)) + "|")
    print("\n".join(out))
    return 1 if errors else 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "median":
        values = [float(a) for a in args if num(a) is not None]
        print(statistics.median(values) if values else "")
    elif cmd == "get":
        with open(args[0]) as f:
            obj = json.load(f)
        for key in args[1:]:
            v = obj.get(key)
            print("" if v is None else (json.dumps(v) if isinstance(v, (list, dict)) else v))
    elif cmd == "table":
        sys.exit(table(args[0]))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
