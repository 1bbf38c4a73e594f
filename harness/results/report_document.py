"""The report as a typed document, built once (harness/results/report.py) and rendered by one
function: `to_markdown`. The HTML page is that Markdown rendered by markdown-it-py (CommonMark and
pipe tables, raw HTML off, so text stays text) in a self-contained page whose plots are embedded as
base64 PNG data URIs. The two files cannot say different things."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.ui import md_table


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]


@dataclass(frozen=True)
class Table:
    """Columns and rows of text cells, already formatted (harness.ui.fmt)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Code:
    text: str
    language: str = "toml"


@dataclass(frozen=True)
class Image:
    """A PNG beside the report (its file name) and its title, shown as the caption."""

    file: str
    title: str


@dataclass(frozen=True)
class Section:
    """A heading (level 2, or 3 inside a section) and what it holds, nested sections included."""

    title: str
    body: Sequence[Block] = field(default_factory=list)
    level: int = 2


Block = Paragraph | Bullets | Table | Code | Image | Section


@dataclass(frozen=True)
class Document:
    title: str  # the one level-1 heading, and the HTML page's title
    body: Sequence[Block]


# ----------------------------------------------------------------------------- Markdown: the one renderer


def _lines(block: Block) -> list[str]:
    if isinstance(block, Section):
        return ["#" * block.level + " " + block.title, ""] + [x for b in block.body for x in _lines(b)]
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Bullets):
        return [f"- {x}" for x in block.items] + [""]
    if isinstance(block, Table):
        return [*md_table(block.columns, block.rows), ""]
    if isinstance(block, Code):
        return [f"```{block.language}", block.text.rstrip("\n"), "```", ""]
    title = block.title.replace("\n", " — ")
    return [f"![{title}]({block.file})", "", f"*{title}*", ""]


def to_markdown(doc: Document) -> str:
    return "\n".join(["# " + doc.title, "", *(x for b in doc.body for x in _lines(b))])


# ----------------------------------------------------------------------------- HTML: that Markdown, rendered

CSS = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.9em}td,th{border:1px solid #ccc;"
    "padding:.3em .6em;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}"
    "img{max-width:100%;border:1px solid #ddd}p:has(>img)+p{font-size:.9em;color:#555}"
)


def to_html(doc: Document, folder: Path) -> str:
    """The Markdown of `doc` as one page; each image's PNG (a file in `folder`) embedded as a data URI."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def embedded_image(self, tokens, idx, options, env) -> str:
        png = (folder / str(tokens[idx].attrGet("src"))).read_bytes()
        tokens[idx].attrSet("src", "data:image/png;base64," + base64.b64encode(png).decode())
        return self.image(tokens, idx, options, env)

    md.add_render_rule("image", embedded_image)
    head = f"<!doctype html><html><head><meta charset='utf-8'>\n<title>{html.escape(doc.title)}</title>\n"
    return head + f"<style>{CSS}</style></head><body>\n" + md.render(to_markdown(doc)) + "</body></html>\n"
