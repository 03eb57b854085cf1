"""Fixtures shared by the whole suite: the throwaway PostgreSQL cluster (``pg_support``)."""

from tests.pg_support import pg_server, pg_url

__all__ = ["pg_server", "pg_url"]
