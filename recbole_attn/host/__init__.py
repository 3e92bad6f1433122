"""RecBole on today's stack: its API answering to our models, and its bugs fixed."""
