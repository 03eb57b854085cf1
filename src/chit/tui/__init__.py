"""chit.tui."""
