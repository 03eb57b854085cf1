"""chit.receipts."""
