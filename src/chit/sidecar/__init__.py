"""chit.sidecar."""
