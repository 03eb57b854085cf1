"""chit.reconcile."""
