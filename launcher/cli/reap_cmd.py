"""Commands: reap (placeholder until implemented)."""
