"""``python -m lakeline`` runs the command line."""

from lakeline.cli.main import main

main()
