"""The click CLI: one root group (:mod:`expo_prof.cli.main`), one module per command."""
