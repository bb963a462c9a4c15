"""One interface per cloud provider, one module each, a registry keyed by name."""
