"""The `jupyter gradcheck` command line: run, tolerance, verify and export."""
