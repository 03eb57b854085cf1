"""chit.vault."""
