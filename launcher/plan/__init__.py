"""What a user asks of a launch, resolved once into the planned launch (`planner.plan`)."""
