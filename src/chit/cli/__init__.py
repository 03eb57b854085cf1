"""chit.cli."""
