"""The chaos harness: a dueq cluster behind a fault proxy, nemeses, and a runner."""
