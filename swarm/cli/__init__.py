"""The `swarm` command line."""
