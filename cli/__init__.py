"""The typer front end. Thin: parsing flags, printing, exit codes."""
