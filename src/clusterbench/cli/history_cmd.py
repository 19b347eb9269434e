"""`clusterbench history` (being written)."""
