"""stackflow's command line, the top layer: `python flows/run.py <command>` (a door into
`cli.main`). Nothing outside this package imports it but that door."""
