"""Thin command layer: parse flags, call the library, render the result at the edge."""
