#!/usr/bin/env python3
"""Bar chart of a compare.py result: mmx ÷ llama.cpp for prefill and decode per entry (one scale
for the tiny model and the slice alike; the line at 1 is parity).
   python3 bench/llamacpp/plot.py results.json out.png [title]
Writes a gnuplot script and data beside out.png and runs gnuplot (Debian's gnuplot-nox)."""
import json, os, subprocess, sys

res, out = sys.argv[1], sys.argv[2]
title = sys.argv[3] if len(sys.argv) > 3 else "llama.cpp vs mmx, same GGUF files"
d = json.load(open(res))
base = os.path.splitext(out)[0]
rows = [e for e in d["entries"] if e["median"]["mmx_tg"] is not None]
with open(base + ".dat", "w") as f:
    f.write("# label prefill decode\n")
    for e in rows:
        m = e["median"]
        lab = e["label"].replace(".gguf", "").split(" (")[0][:32]
        pp = m["mmx_pp"] / m["llama_pp"] if m["llama_pp"] else 0
        f.write(f'"{lab}" {pp} {m["mmx_tg"] / m["llama_tg"]}\n')
a = d["args"]
gp = f"""set terminal pngcairo size 1000,520 font ',10' noenhanced
set output '{out}'
set title "{title}\\nmmx / llama.cpp, threads {a['threads']}, prompt {a['prompt']}, gen {a['gen']}, depth {a['depth']}, medians of {a['rounds']} alternating rounds"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by 25 right scale 0
set bmargin 10
set lmargin 12
set key top right
set grid ytics
set ylabel 'mmx tokens/s / llama.cpp tokens/s'
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5 lc rgb '#000000'
plot '{base}.dat' using 2:xtic(1) title 'prefill' lc rgb '#7570b3', '' using 3 title 'decode' lc rgb '#d95f02'
"""
with open(base + ".gp", "w") as f:
    f.write(gp)
subprocess.run(["gnuplot", base + ".gp"], check=True)
print(f"wrote {out}")
