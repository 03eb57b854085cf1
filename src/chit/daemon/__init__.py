"""chit.daemon — the daemon process of a home: its life and its control socket's server.

One per ``CHIT_HOME`` (``chit.daemon.service``): it owns every server session through a
:class:`chit.engine.local.LocalEngine` and serves it on the control socket
(``chit.daemon.server``). Clients use :mod:`chit.engine.remote`. See docs/daemon.md.
"""
