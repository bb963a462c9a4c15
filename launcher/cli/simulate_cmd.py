"""Commands: simulate (placeholder until implemented)."""
