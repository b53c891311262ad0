"""`referee schema`: the JSON Schema of spec files."""

from __future__ import annotations

import click

__all__ = ["schema"]


@click.command()
@click.option("--plugins", is_flag=True, help="Include the installed plugins' types.")
def schema(plugins: bool) -> None:
    """Print the JSON Schema of spec files (docs/spec.schema.json is the built-in one): point
    an editor at it to check specs as you type."""
    from referee.spec.model import schema_text

    click.echo(schema_text(plugins=plugins))
