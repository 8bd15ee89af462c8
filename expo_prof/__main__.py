"""``python -m expo_prof`` = the ``expo-prof`` command."""

from expo_prof.cli.main import main

if __name__ == "__main__":
    main()
