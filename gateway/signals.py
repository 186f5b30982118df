"""The signals `gateway serve` handles, apart from the code that handles them: a supervisor
starting its workers blocks them before it has read any settings (gateway.launch)."""

from __future__ import annotations

import signal
from typing import Final

# SIGHUP stops too: a closed terminal sends it, and the audit trail must still be flushed.
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# `gateway reload` (gateway.reread): reread the configuration file.
RELOAD_SIGNAL: Final = signal.SIGUSR1
