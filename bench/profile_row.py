#!/usr/bin/env python3
"""One markdown table row from bench/profile_load.py's JSON result: profile_row.py cpu|memory '<json>'."""
import json
import sys

r = json.loads(sys.argv[2])
if sys.argv[1] == "cpu":
    cells = [r["messages"], r["decisions"], r["decisions_per_s"], f'{r["service_cpu_ms_per_deny"]:.3f}',
             f'{r["user_ms_per_deny"]:.3f}', f'{r["system_ms_per_deny"]:.3f}', r["answer_kib"], r["loadavg"]]
else:
    cells = [r["clients"], r["messages"], "yes" if r.get("fresh_service") else "no", r["decisions"],
             r["decisions_per_s"], r["answer_kib"], r["rss_before_mib"],
             f'**{r["peak_rss_mib"]}**', f'{r["service_cpu_ms_per_deny"]:.3f}', r["loadavg"]]
print("| " + " | ".join(str(c) for c in cells) + " |")
