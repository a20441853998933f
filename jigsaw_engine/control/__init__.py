"""The controller: owns every pipeline on the cluster and turns their progress into events."""
