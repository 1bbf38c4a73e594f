"""Tiny, architecture-faithful verifier stand-ins built locally."""
