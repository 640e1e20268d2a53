"""The operations console: failed messages an operator can see, understand and act on (issue 20)."""
