"""The stack task's phases, each a room of its own (the task, `tasks.stacks.stack_operation`, runs
them in order): what one call shares (`call`), what the stack runs with (`inputs`), the skip of an
unchanged stack (`skip`), its slot and lock (`hold`), the operation (`operate`) and what it reports
(`report`)."""
