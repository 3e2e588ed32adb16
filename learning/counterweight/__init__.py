"""The counterweight experiment: a standing humanoid holding a payload reaches past its balance limit, and a
policy trained through the whole-body layer learns where to put the rest of its body."""
