"""vLLM engines (offline, server, attach) behind one interface, and how they are started."""
