"""Pricing: catalogs, interruption risk and ranking. Pure: no cloud calls at rank time."""
