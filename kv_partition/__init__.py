"""KV-cache planning and the prefix block store, in plain Python (no Ray)."""
