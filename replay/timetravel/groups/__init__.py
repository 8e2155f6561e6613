"""Many runs at once (``rewind bisect --between``): their facts read from a source (runs), and
where they changed between groups (run_groups, pure)."""
