"""chit.store."""
