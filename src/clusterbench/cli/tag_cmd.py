"""`clusterbench tag` and `untag` (being written)."""
