"""The variants that fill ppo.py's slots: recurrent agent, curiosity bonus, cloning, several policies, self-play, Ray."""
