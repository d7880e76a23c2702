"""Receiver formats of chat messages: discord, slack (json is the event itself)."""
