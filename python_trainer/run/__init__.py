"""The train command around ppo.py: its phases, the run folder, the curriculum, what the agents do."""
