"""The engine on Ray: the controller as a detached, named actor any process can reach."""
