"""Commands: runs (placeholder until implemented)."""
