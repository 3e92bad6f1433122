"""Options: what each RecBole key and command flag may be, declared and checked once."""
