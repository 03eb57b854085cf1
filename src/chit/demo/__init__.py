"""chit.demo."""
