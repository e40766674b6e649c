package pipeline

// Template returns Ballet's template pipeline, the one a ticket runs on when
// its project has neither a pipeline for its type nor a default one: the
// example of the specification (implement → review → verify → integrate,
// max_iterations 3). Each call returns a fresh copy.
func Template() Definition {
	return Definition{
		MaxIterations: 3,
		Stages: []Stage{
			{
				ID:   "implement",
				Kind: KindAgent,
				Name: "Implement",
				Instructions: "Implement the ticket so that every acceptance criterion holds.\n" +
					"Work on the ticket's branch, add or update tests for the behaviour you change, and keep the build, linters and tests green.\n" +
					"When a previous stage handed over a report, address every point it raises.\n" +
					"Commit and push your changes, then submit done with a short report of what you changed and how you tested it.\n" +
					"Submit blocked when you cannot go on without an answer, and failed when the ticket cannot be done as written.\n",
				Next: Next{Done: "review", Failed: TargetQuestion, Blocked: TargetQuestion},
			},
			{
				ID:   "review",
				Kind: KindAgent,
				Instructions: "Review the changes on this branch against the ticket and its acceptance criteria.\n" +
					"Check correctness, tests, error handling, security, readability and consistency with the rest of the code base; do not change the code yourself.\n" +
					"Submit done when it is ready to merge, failed with a list of the changes it needs (each with file and reason) when it is not, and blocked when you cannot judge it without an answer.\n",
				Next: Next{Done: "verify", Failed: "implement", Blocked: TargetQuestion},
			},
			{
				ID:   "verify",
				Kind: KindAgent,
				Instructions: "Verify that the branch does what the ticket asks: build it, run the whole test suite and exercise every acceptance criterion yourself.\n" +
					"Submit done when every criterion holds, failed with the steps that reproduce each failure when one does not, and blocked when you cannot verify it without an answer.\n",
				Next: Next{Done: "integrate", Failed: "implement", Blocked: TargetQuestion},
			},
			{
				ID:     "integrate",
				Kind:   KindPlatform,
				Action: ActionMerge,
				Next:   Next{Done: TargetDone, Failed: "implement", Blocked: TargetQuestion},
			},
		},
	}
}
