"""The whole-body layer's constraints: what every level of the cascade keeps."""
