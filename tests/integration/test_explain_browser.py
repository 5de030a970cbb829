"""``simulate --output html`` in a real browser: headless Chromium loads the page from a file:// URL.

Needs a Chromium binary (Debian's ``chromium`` package: ``apt-get install -y chromium``); skipped, saying
so, where none is found. Chromium runs with no network of its own (the flags below) and a new profile.
Checks: the screenshot is a PNG of the window's size that is not blank, and clicking a column header
(the page's ``#sort=`` test hook clicks it on load) sorts the table, as ``--dump-dom`` shows.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WIDTH, HEIGHT = 1024, 768


def chromium() -> str:
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) if name else None
        if found:
            return found
    pytest.skip("no Chromium binary found (install Debian's chromium package, or set CHROMIUM=/path/to/it)")


def run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    flags = [
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
    ]
    return subprocess.run([binary, *flags, *args], capture_output=True, timeout=120, check=False)


@pytest.fixture
def report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code = main(
        ["simulate", "-f", str(EXAMPLES / "cluster.yaml"), "--config", str(EXAMPLES / "config.yaml"), "-o", "html"]
    )
    assert code == 0
    path = tmp_path / "report.html"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    return path


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of raw pixel bytes) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    pos, idat = 8, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunk = data[pos + 4 : pos + 8]
        if chunk == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        line = raw[y * (stride + 1) : (y + 1) * (stride + 1)]
        kind, row = line[0], bytearray(line[1:])  # the row's filter type (PNG spec 9.2)
        for i in range(stride):
            left = row[i - bpp] if i >= bpp else 0
            up = previous[i]
            corner = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                row[i] = (row[i] + left) & 0xFF
            elif kind == 2:
                row[i] = (row[i] + up) & 0xFF
            elif kind == 3:
                row[i] = (row[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                row[i] = (row[i] + predictor) & 0xFF
        rows.append(bytes(row))
        previous = row
    return width, height, [r[i : i + 3] for r in rows for i in range(0, stride, bpp)]


def test_screenshot_is_a_png_of_the_window_size_and_not_blank(report: Path, tmp_path: Path) -> None:
    binary = chromium()
    shot = tmp_path / "shot.png"
    result = run_chromium(
        binary, tmp_path / "profile", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", report.as_uri()
    )
    assert shot.exists(), result.stderr.decode(errors="replace")[-2000:]
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    colours = set(pixels)
    # Text, table borders, green "Scheduled" and red "Unschedulable", the coloured verdict cells: a blank
    # or an error page has a handful of colours at most.
    assert len(colours) > 50, f"only {len(colours)} colours: blank page?"
    white = sum(1 for pixel in pixels if pixel == b"\xff\xff\xff")
    assert white < 0.95 * len(pixels)


def test_clicking_a_header_sorts_the_table(report: Path, tmp_path: Path) -> None:
    binary = chromium()
    # Column 4 of the pods table is Attempts: ascending puts the gated pod (0 attempts) first.
    result = run_chromium(binary, tmp_path / "profile", "--dump-dom", report.as_uri() + "#sort=pods:4")
    dom = result.stdout.decode()
    assert 'id="pods"' in dom, result.stderr.decode(errors="replace")[-2000:]
    table = dom[dom.index('id="pods"') :]
    table = table[: table.index("</table>")]
    pods = re.findall(r'href="#pod-\d+">([^<]+)<', table)
    assert pods[0] == "default/gated"
    assert len(pods) == 8
    assert re.search(r'<th class="asc">Attempts</th>', table)
