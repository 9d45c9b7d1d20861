"""The Pulumi programs: one plain function per stack, with typed arguments and outputs."""
