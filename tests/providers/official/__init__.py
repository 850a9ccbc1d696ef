"""Witness tests: each provider's official client driven against our fake, one module per provider.

tests/providers/test_official_clients.py imports every module here (one line each), so pytest
collects each test once; the modules are not named test_*.py for that reason. docs/providers.md
lists what each witnesses.
"""
