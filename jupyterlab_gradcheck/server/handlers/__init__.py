"""REST handlers, one module per concept; `routes.py` holds the table that maps them."""
