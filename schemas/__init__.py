"""The marshmallow schemas: the one source of request and response shapes."""
