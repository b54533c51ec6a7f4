"""What the benchmark renderers share: markdown tables, medians, and rewriting one generated
block of docs/benchmarks.md.

render-benchmarks.py (the registry micro-benchmarks) and render-daemon-bench.py (the daemon
under load) each own one section of the document. A section holds a hand-written notes block
and a generated block, each between HTML comment markers; a renderer replaces only its
generated block, or appends the whole section when the markers are missing.
"""

import os
import statistics


def table(header, rows):
    """A markdown table: 'header' cells, then one line per row."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def median(values):
    """The median of 'values' (the mean of the middle two for an even count); None if empty."""
    values = list(values)
    return statistics.median(values) if values else None


class DocSection:
    """One renderer's section of the document, named by its heading and marker tag.

    The markers read "<!-- TAG:notes:begin (...) -->" ... "<!-- TAG:notes:end -->" and
    "<!-- TAG:generated:begin (...) -->" ... "<!-- TAG:generated:end -->".
    """

    def __init__(self, heading, tag, script, source):
        self.heading = heading
        self.notes_begin = f"<!-- {tag}:notes:begin (hand-written; {script} keeps it) -->"
        self.notes_end = f"<!-- {tag}:notes:end -->"
        self.gen_begin = (f"<!-- {tag}:generated:begin (written by scripts/{script} "
                          f"from {source}: do not edit by hand) -->")
        self.gen_prefix = f"<!-- {tag}:generated:begin"
        self.gen_end = f"<!-- {tag}:generated:end -->"

    def write(self, path, generated):
        """Replaces the generated block in the document at 'path' with 'generated'."""
        text = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
        block = f"{self.gen_begin}\n{generated}\n{self.gen_end}"
        if self.gen_prefix in text and self.gen_end in text:
            start = text.index(self.gen_prefix)
            end = text.index(self.gen_end) + len(self.gen_end)
            text = text[:start] + block + text[end:]
        else:
            if not text.endswith("\n"):
                text += "\n"
            text += (f"\n{self.heading}\n\n{self.notes_begin}\n(Notes on these numbers go "
                     f"here.)\n{self.notes_end}\n\n{block}\n")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
