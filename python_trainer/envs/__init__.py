"""The games as environments: the wire protocol, which game, its instances, and the vector envs over them."""
