"""chit.servers."""
