#!/usr/bin/env python3
"""view-screenshots.py [KDFLOW] — the screenshots of docs/view/ (README, docs/view.md): kdflow view
on samples/resnet18_tuned in headless chromium (test/view/check_view.py's driver), unfolded,
folded, and with a kernel selected. Needs chromium (scripts/install-deps.sh)."""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "view"))
import check_view  # noqa: E402


def main():
    kdflow = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "kdflow")
    out = os.path.join(ROOT, "docs", "view")
    os.makedirs(out, exist_ok=True)
    html = os.path.join(tempfile.mkdtemp(prefix="kdflow-shots-"), "resnet18_tuned.html")
    subprocess.run([kdflow, "view", os.path.join(ROOT, "samples", "resnet18_tuned"), "-q", "-o", html], check=True)
    browser = check_view.Browser(check_view.shutil.which("chromium"), 1600, 1000)
    try:
        page = check_view.Page(browser)
        page.open(html)
        # Unfolded: the top of the graph at a readable zoom.
        page.eval("window.kdflowView.zoomTo(560, 330, 0.75)")
        page.screenshot(os.path.join(out, "resnet18_tuned-unfolded.png"))
        # Folded: every node folded, the same place.
        page.eval("document.getElementById('fold-all').click()")
        page.screenshot(os.path.join(out, "resnet18_tuned-folded.png"))
        page.eval("document.getElementById('unfold-all').click()")
        # A winograd kernel selected (k28: the panel as explain gives it), what it depends on.
        page.eval("window.kdflowView.select('kernel', 28)")
        page.eval("document.getElementById('zoom-sel').click()")
        page.screenshot(os.path.join(out, "resnet18_tuned-selected.png"))
        page.eval("document.getElementById('deps-up').click()")
        page.screenshot(os.path.join(out, "resnet18_tuned-depends-on.png"))
    finally:
        browser.close()
    for f in sorted(os.listdir(out)):
        print("view-screenshots: docs/view/" + f)


if __name__ == "__main__":
    main()
