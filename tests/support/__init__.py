"""Helpers shared by test modules: builders, scripted servers, data tables, fixtures.

A test module imports from here and from nowhere else under ``tests``: never from another test
module or a conftest (``tests/test_architecture.py`` checks it). A helper moves here when a
second module needs it.
"""
