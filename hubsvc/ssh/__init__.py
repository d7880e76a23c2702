"""git over SSH: a server in the service's own process and event loop (asyncssh)."""
