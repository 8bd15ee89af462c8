"""`expo-prof record`: launch a server command, drive a load, profile, and keep a self-describing run directory."""
