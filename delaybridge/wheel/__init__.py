"""wheel."""
