"""mkdocs hook: the CLI reference page is generated from the typer app at build time.

`docs/reference/cli.md` holds a `<!-- cli-reference -->` marker; every build replaces it with
each command's usage, arguments and options as `launcher --help` would print them (the same
click objects typer builds), so the reference cannot drift from the CLI. Help text is escaped:
`<DIR>` in an option's help is text, not an HTML tag.
"""

from __future__ import annotations

import html
import importlib

MARKER = "<!-- cli-reference -->"
PAGE = "reference/cli.md"


def _text(s: str | None) -> str:
    return html.escape(" ".join((s or "").split()), quote=False)


def _command_docs(cmd, ctx, path: str, level: int) -> list[str]:
    out = [f"{'#' * level} `{path}`", ""]
    if cmd.help:
        out += [_text(cmd.help.split("\n\n")[0]) if level > 2 else _text(cmd.help), ""]
        rest = cmd.help.split("\n\n")[1:] if level > 2 else []
        for para in rest:
            out += [_text(para), ""]
    pieces = cmd.collect_usage_pieces(ctx)
    out += ["```console", f"$ {path} {' '.join(pieces)}".rstrip(), "```", ""]
    args, opts = [], []
    for param in cmd.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        (args if param.param_type_name == "argument" else opts).append(record)
    for title, records in (("Arguments", args), ("Options", opts)):
        if not records:
            continue
        out += [f"**{title}**", ""]
        for name, help_text in records:
            out.append(f"- `{name}`: {_text(help_text)}" if help_text else f"- `{name}`")
        out.append("")
    subcommands = getattr(cmd, "list_commands", None)
    if subcommands is not None:
        names = subcommands(ctx)
        if names:
            out += ["**Commands**", ""]
            for name in names:
                sub = cmd.get_command(ctx, name)
                out.append(f"- `{path} {name}`: {_text(sub.get_short_help_str(limit=200))}")
            out.append("")
            for name in names:
                sub = cmd.get_command(ctx, name)
                sub_ctx = type(ctx)(sub, parent=ctx, info_name=name)
                out += _command_docs(sub, sub_ctx, f"{path} {name}", min(level + 1, 6))
    return out


def cli_reference_markdown() -> str:
    """Markdown for every command of the `launcher` typer app, in `launcher --help` order."""
    import typer

    from launcher.cli.main import COMMAND_MODULES
    from launcher.cli.app import app

    for name in COMMAND_MODULES:
        importlib.import_module(name)
    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="launcher")
    return "\n".join(_command_docs(command, ctx, "launcher", 2))


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its {MARKER} marker")
    return markdown.replace(MARKER, cli_reference_markdown())
