"""The web UI: view models turning a run, a diff or a bisection into the JSON the pages draw,
the runs listing, and the static pages themselves (package data, no build step)."""
