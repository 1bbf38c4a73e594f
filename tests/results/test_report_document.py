"""The report's document (harness/results/report_document.py): one Markdown renderer, and HTML that
is that Markdown rendered, plots embedded."""

from __future__ import annotations

import base64

from harness.results.report_document import (
    Bullets,
    Code,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
    to_html,
    to_markdown,
)

PNG = b"\x89PNG\r\n\x1a\n-not-a-real-image"


def _doc() -> Document:
    return Document(
        "Benchmark report: r1",
        [
            Section(
                "Verdict",
                [
                    Table(["suite", "speedup"], [["chat", "1.80x [1.71, 1.89]"], ["a|b", "—"]]),
                    Paragraph("Cells named <suite>@nocache & co."),
                    Bullets(["one", "two"]),
                ],
            ),
            Section("Every measured cell", [Section("chat · eagle", [Paragraph("text")], level=3)]),
            Paragraph("Load: one load point (c=4)."),
            Section("Plots", [Image("speedup.png", "Speedup vs concurrency\nband: 95% CI")]),
            Section("Recipe", [Code("[speculative_config]\nk = 3\n")]),
        ],
    )


def test_markdown_is_the_blocks_in_order():
    assert to_markdown(_doc()) == "\n".join(
        [
            "# Benchmark report: r1",
            "",
            "## Verdict",
            "",
            "| suite | speedup |",
            "|---|---|",
            "| chat | 1.80x [1.71, 1.89] |",
            "| a\\|b | — |",
            "",
            "Cells named <suite>@nocache & co.",
            "",
            "- one",
            "- two",
            "",
            "## Every measured cell",
            "",
            "### chat · eagle",
            "",
            "text",
            "",
            "Load: one load point (c=4).",
            "",
            "## Plots",
            "",
            "![Speedup vs concurrency — band: 95% CI](speedup.png)",
            "",
            "*Speedup vs concurrency — band: 95% CI*",
            "",
            "## Recipe",
            "",
            "```toml",
            "[speculative_config]",
            "k = 3",
            "```",
            "",
        ]
    )


def test_html_renders_that_markdown_with_text_kept_as_text_and_plots_embedded(tmp_path):
    (tmp_path / "speedup.png").write_bytes(PNG)
    page = to_html(_doc(), tmp_path)
    assert page.startswith("<!doctype html>") and "<title>Benchmark report: r1</title>" in page
    assert page.index("<h1>Benchmark report: r1</h1>") < page.index("<h2>Verdict</h2>") < page.index("<h3>")
    assert "<td>a|b</td>" in page and "<th>speedup</th>" in page  # the escaped pipe stays in its cell
    assert "Cells named &lt;suite&gt;@nocache &amp; co." in page  # raw HTML off: text, not a tag
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page and 'src="speedup.png"' not in page
    assert '<code class="language-toml">[speculative_config]\nk = 3\n</code>' in page
    assert page.endswith("</body></html>\n")
