#!/usr/bin/env python3
"""Every relative link in the repository's Markdown resolves.

Scans each *.md file git knows (tracked, or new and not ignored) for inline
links and images (`[text](target)`, `![alt](target)`) and reference
definitions (`[id]: target`), outside fenced code blocks and code spans.
A link with a scheme (`https:`, `mailto:`) is left alone. Any other target
must name a file or directory that exists, relative to the file that links
to it; an anchor (`page.md#section`, `#section`) must be one of the target's
headings, slugged as GitHub does. Prints every broken link and exits 1 if
there is one.

    python3 scripts/check_links.py            # the whole repository
    python3 scripts/check_links.py FILE.md…   # only these files
"""

import os
import re
import subprocess
import sys
from urllib.parse import unquote

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def markdown_files():
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return sorted({p for p in out.split("\0") if p and os.path.isfile(os.path.join(ROOT, p))})


def prose_lines(text):
    """(line number, line) for every line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == "":
                fence = None
            continue
        yield number, line


def slug(heading):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        found, seen = set(), {}
        for _, line in prose_lines(text):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
            found.update(HTML_ANCHOR.findall(line))
        _anchors[path] = found
    return _anchors[path]


def links(text):
    for number, line in prose_lines(text):
        m = REFERENCE.match(line)
        if m:
            yield number, m.group(1)
            continue
        for m in INLINE.finditer(CODE_SPAN.sub("", line)):
            yield number, m.group(1)


def check(rel):
    path = os.path.join(ROOT, rel)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    broken = []
    for number, target in links(text):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        file_part = unquote(file_part.split("?", 1)[0])
        if file_part.startswith("/"):
            resolved = os.path.join(ROOT, file_part.lstrip("/"))
        elif file_part:
            resolved = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
        else:
            resolved = path
        where = f"{rel}:{number}: {target}"
        if not os.path.exists(resolved):
            broken.append(f"{where}: no such file or directory")
        elif anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if unquote(anchor).lower() not in anchors(resolved):
                broken.append(f"{where}: no heading with anchor #{anchor} in {os.path.relpath(resolved, ROOT)}")
    return broken


def main(argv):
    files = [os.path.relpath(os.path.abspath(a), ROOT) for a in argv] or markdown_files()
    broken = [b for rel in files for b in check(rel)]
    for b in broken:
        print(b)
    print(f"links: {len(files)} Markdown files, {len(broken)} broken link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
