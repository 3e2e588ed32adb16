"""The whole-body layer's tasks: what a level of the cascade minimises."""
