"""Subscribers of the event bus: the chat webhook outbox and the WebSocket hub."""
