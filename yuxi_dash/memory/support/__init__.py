"""Memory support: fact corrections, forgetting a user, and the support bundle."""
