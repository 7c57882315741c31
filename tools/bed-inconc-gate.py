#!/usr/bin/env python3
"""Exit 0 when every test of a `metaroce run` report that is not PASS,
PASS-NONSTRICT, XFAIL or UNSUPPORTED is an INCONC of the test bed (a timer
below the window margin: the harness says so in the reason) or an INCONC
listed in LISTED (one test id a line, `#` comments); else print the others
and exit 1. Used by lab/rxe/certify.sh and .ci/run (independent/mp-py).

    tools/bed-inconc-gate.py REPORT.json [LISTED]
"""
import json
import sys

BED = ("cannot be judged on this test bed", "cannot answer in time")


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    report = json.load(open(sys.argv[1]))
    listed = set()
    if len(sys.argv) == 3:
        listed = {l.split()[0] for l in open(sys.argv[2]) if l.strip() and not l.startswith("#")}
    other = [
        t["id"]
        for t in report["tests"]
        if t["verdict"] in ("INCONC", "ERROR", "FAIL")
        and not (t["verdict"] == "INCONC" and (t["id"] in listed or any(b in (t.get("reason") or "") for b in BED)))
    ]
    bed = sum(1 for t in report["tests"] if t["verdict"] == "INCONC") - sum(
        1 for t in report["tests"] if t["verdict"] == "INCONC" and t["id"] in other)
    print(f"INCONC of the test bed or listed: {bed}; not examined: {' '.join(other) if other else 'none'}")
    return 1 if other else 0


if __name__ == "__main__":
    sys.exit(main())
