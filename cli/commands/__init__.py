"""The commands that run no flow, one module each: cloud, graph, migrate, outputs, server."""
