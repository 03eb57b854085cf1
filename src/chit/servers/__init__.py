"""chit.servers: the registry of MCP servers chit connects to (``CHIT_HOME/config.toml``).

* :class:`ServerSpec` - one server as stored (secrets sealed).
* :class:`Registry` - list/add/remove/resolve, atomic all-or-nothing writes.
* :func:`import_mcp_servers` - import the ``mcpServers`` JSON of Claude Desktop, Claude
  Code and Cursor, with a reason for every skipped entry.
* :func:`list_tools` - connect and list tools with their task support.
"""

from chit.servers.importer import (
    ImportedServer,
    ImportReport,
    SkippedServer,
    import_mcp_servers,
)
from chit.servers.registry import Registry
from chit.servers.resolve import ResolvedServer, resolve
from chit.servers.secrets import Sealer, SealerFactory, vault_factory
from chit.servers.spec import SEALED_PREFIX, ServerSpec, is_sealed, is_secret_env
from chit.servers.toml_io import ConfigError

__all__ = [
    "SEALED_PREFIX",
    "ConfigError",
    "ImportReport",
    "ImportedServer",
    "Registry",
    "ResolvedServer",
    "Sealer",
    "SealerFactory",
    "ServerSpec",
    "SkippedServer",
    "import_mcp_servers",
    "is_sealed",
    "is_secret_env",
    "resolve",
    "vault_factory",
]
