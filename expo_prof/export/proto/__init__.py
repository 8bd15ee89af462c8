"""The Perfetto proto subset expo-prof writes with, and its generated module (docs/export.md)."""
