"""Policies: where the next attempt runs (recovery) and spot vs on-demand vs wait (deadline).

Pure decision objects, registered by name. The same objects drive the controller and
`launcher simulate`.
"""
