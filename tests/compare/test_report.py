"""Reports: the HTML renders with its figures embedded as PNG data URIs; the Markdown links real files."""
import base64
import os
import re
import struct
from html.parser import HTMLParser

from compareutil import SIZES, bench_doc, fixture, gloo_time_us, write_doc

from real.compare.calibrate import calibrate
from real.compare.markdown_report import write_report
from real.compare.measured import read_measurement
from real.compare.score import compare


class _Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.images, self.tags, self.tables = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))
        if tag == "table":
            self.tables += 1


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _check_html(path: str, nfigures: int) -> _Images:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    p = _Images()
    p.feed(text)
    p.close()
    assert p.tags[0] == "html" and "body" in p.tags
    assert len(p.images) == nfigures
    for img in p.images:
        assert img["alt"]
        head, _, data = img["src"].partition(",")
        assert head == "data:image/png;base64"
        width, height = _png_size(base64.b64decode(data, validate=True))
        assert 600 <= width <= 1200 and 300 <= height <= 800      # legible at notebook width
    assert "src='http" not in text and 'src="http' not in text  # self-contained
    return p


def test_report_of_a_published_case(tmp_path):
    c = compare(read_measurement(fixture("a1_dgx_a100_all_reduce.txt")), "dgx-a100")
    paths = write_report(str(tmp_path), [c], commands=["collsim compare --measured a1.txt --topology dgx-a100"])
    p = _check_html(paths["html"], 3)
    assert p.tables >= 2
    md = open(paths["markdown"], encoding="utf-8").read()
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", md)
    assert len(links) == 3 and all(os.path.isfile(os.path.join(tmp_path, l)) for l in links)
    assert "| 16 GiB |" in md and "median absolute error" in md and "collsim compare --measured" in md
    _check_markdown_tables(md)


def _check_markdown_tables(md: str) -> None:
    """Every row of a Markdown table has as many cells as its header (a stray | would add one)."""
    width = None
    for line in md.splitlines():
        if not line.startswith("|"):
            width = None
            continue
        cells = re.sub(r"\\\|", "", line).count("|")
        width = width or cells
        assert cells == width, line


def test_report_with_calibration_and_holdout(tmp_path, cli):
    ag = write_doc(tmp_path, "ag.json", bench_doc("all_gather", {s: gloo_time_us("all_gather", s, 2.0, 100.0) for s in SIZES}))
    ar = write_doc(tmp_path, "ar.json", bench_doc("all_reduce", {s: 1.1 * gloo_time_us("all_reduce", s, 2.0, 100.0) for s in SIZES}))
    cal = calibrate([read_measurement(ag)], holdout=[read_measurement(ar)])
    paths = write_report(str(tmp_path / "rep"), list(cal.holdout), calibration=cal)
    _check_html(paths["html"], 3)
    md = open(paths["markdown"], encoding="utf-8").read()
    assert "## Calibration" in md and "held out: all_reduce" in md and "-9.1%" in md   # 1/1.1 - 1
    _check_markdown_tables(md)
    code, out, err = cli("compare", "--measured", ar, "--topology", "switch:n=2", "--report", tmp_path / "cli")
    assert code == 0 and "report.html" in out
    _check_html(str(tmp_path / "cli" / "report.html"), 3)
