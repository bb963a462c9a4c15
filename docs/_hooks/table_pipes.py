"""mkdocs hook: `\\|` inside a code span of a table row is a pipe.

GitHub's tables need a pipe inside a code span escaped (`down RUN\\|CLUSTER`), or it splits the
cell there; Python-Markdown's tables keep code spans whole and would show the backslash. The pages
keep the escaped form, so they read right on GitHub too, and the site gets the plain pipe.
"""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"`[^`\n]*`")


def unescape_table_code_pipes(markdown: str) -> str:
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith(("```", "~~~")):
            fence = not fence
        if not fence and line.lstrip().startswith("|"):
            line = _CODE_SPAN.sub(lambda m: m.group(0).replace("\\|", "|"), line)
        out.append(line)
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return unescape_table_code_pipes(markdown)
