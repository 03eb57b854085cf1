"""chit.runtime."""
