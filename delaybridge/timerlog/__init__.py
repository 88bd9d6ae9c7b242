"""timerlog."""
