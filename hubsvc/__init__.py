"""hubsvc: a self-hostable repository hosting service API."""

__version__ = "0.1.0"
