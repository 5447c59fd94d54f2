"""``python -m lakeline`` runs the command line."""

from lakeline.cli import app

app(prog_name="lakeline")
