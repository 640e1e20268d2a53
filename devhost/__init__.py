"""Local Functions dev host that runs the app against the emulator."""
