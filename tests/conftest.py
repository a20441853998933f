"""Shared test helpers. Engine tests run without Django, so nothing here may import it."""
