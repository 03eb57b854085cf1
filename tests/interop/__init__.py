"""Interop tests: chit against third-party MCP tooling installed from npm."""
