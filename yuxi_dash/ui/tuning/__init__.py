"""The tuning lab's page parts: the run's slices and progress, its result, the turn charts."""
