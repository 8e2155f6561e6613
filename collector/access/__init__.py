"""Who may talk to a server: tokens and their back-off, allowed Host and Origin."""
