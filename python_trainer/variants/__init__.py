"""What fills ppo.py's slots: LSTM, curiosity, cloning, several policies, self-play, Ray rollouts."""
