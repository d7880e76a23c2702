"""The web pages the service serves at `/`: static files, a client of the public API."""
