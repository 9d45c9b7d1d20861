"""The pipeline as data: the stacks and steps every flow walks (`pipeline.graph.GRAPH`)."""
