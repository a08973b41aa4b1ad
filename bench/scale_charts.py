#!/usr/bin/env python3
"""Draws the scale curves of bench/scale.sh as SVG line charts, log-log, one per sweep and
metric: messages per second, and p99 / p99.99 latency, each for batches of 100 and of 1.
Usage: python3 bench/scale_charts.py <directory holding scale.tsv>"""
import math
import sys
from pathlib import Path

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 400, 70, 170, 40, 50


def read(path):
    rows = []
    for line in path.read_text().splitlines():
        cells = line.split("\t")
        if len(cells) < 8 or cells[3] == "failed":
            continue
        rows.append({"sweep": cells[0], "value": float(cells[1]), "batch": cells[2],
                     "msgs": float(cells[3]), "p99": float(cells[6]), "p9999": float(cells[7])})
    return rows


def chart(title, xlabel, ylabel, series):
    points = [p for _, line in series for p in line]
    xs = [x for x, _ in points]
    ys = [y for _, y in points if y > 0]
    lx0, lx1 = math.log10(min(xs)), math.log10(max(xs))
    ly0, ly1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    lx1 = lx1 if lx1 > lx0 else lx0 + 1
    ly1 = ly1 if ly1 > ly0 else ly0 + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (math.log10(x) - lx0) / (lx1 - lx0) * plot_w

    def py(y):
        return TOP + plot_h - (math.log10(y) - ly0) / (ly1 - ly0) * plot_h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>']
    for decade in range(ly0, ly1 + 1):
        y = TOP + plot_h - (decade - ly0) / (ly1 - ly0) * plot_h
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** decade:g}</text>')
    for x in sorted(set(xs)):
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">{x:g}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 10}" text-anchor="middle">{xlabel}</text>')
    out.append(f'<text x="16" y="{TOP + plot_h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {TOP + plot_h / 2})">{ylabel}</text>')
    out.append(f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>')
    for index, (name, line) in enumerate(series):
        color = COLORS[index % len(COLORS)]
        line = sorted(p for p in line if p[1] > 0)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in line)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in line:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}"/>')
        ly = TOP + 10 + index * 18
        out.append(f'<line x1="{WIDTH - RIGHT + 12}" x2="{WIDTH - RIGHT + 32}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{WIDTH - RIGHT + 38}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    directory = Path(sys.argv[1])
    rows = read(directory / "scale.tsv")
    labels = {"producers": "pinned producers", "partitions": "partitions (4 balanced producers)",
              "connections": "idle connections beside 1 producer"}
    for sweep, xlabel in labels.items():
        mine = [r for r in rows if r["sweep"] == sweep]
        if not mine:
            continue
        by_batch = lambda key, batch: [(r["value"], r[key]) for r in mine if r["batch"] == batch]
        throughput = [(f"batch {b}", by_batch("msgs", b)) for b in ("100", "1")]
        latency = [(f"batch {b} {name}", by_batch(key, b))
                   for b in ("100", "1") for key, name in (("p99", "p99"), ("p9999", "p99.99"))]
        (directory / f"scale-{sweep}-throughput.svg").write_text(
            chart(f"{sweep}: throughput, 100-byte messages", xlabel, "messages / s", throughput))
        (directory / f"scale-{sweep}-latency.svg").write_text(
            chart(f"{sweep}: latency, 100-byte messages", xlabel, "ms", latency))


if __name__ == "__main__":
    main()
