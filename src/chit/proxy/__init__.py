"""``chit proxy``: agent hosts reach their MCP servers through chit (see ``docs/proxy.md``)."""
