"""Checkers behind referee's rewards, usable on their own (JSON Schema, math answers)."""
