"""The support desk: fact corrections, forgetting a user, and the support bundle."""
