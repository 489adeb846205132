"""Policy learners on the contact environments (SHAC, BPTT, PPO)."""
