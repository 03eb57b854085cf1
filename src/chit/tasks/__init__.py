"""chit.tasks."""
