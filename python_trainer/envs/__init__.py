"""The games as environments: the wire protocol, which game, its instances and their display, the vector envs."""
