"""chit: durable, access-sensitive work receipts for asynchronous MCP work."""

__version__ = "0.1.0"
