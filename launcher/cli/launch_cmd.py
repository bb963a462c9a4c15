"""Commands: launch (placeholder until implemented)."""
