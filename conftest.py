"""Plugins every test folder shares: the simulated cluster's fixtures (simcluster/fixtures.py), registered
once here for sparkc's cluster tier (tests/cluster) and the simulator's own tests (simcluster/tests), so
that one pytest run over both makes one session cluster."""

pytest_plugins = ["simcluster.fixtures"]
