"""The whole job's plan and what it costs: the dry run (every stage's commands, configs and estimates,
checked against the verifier's structure and the hardware it names), its cost model, the bench's
precision, a budget fit and the spread over nodes. Above train/ and bench/, whose pieces it plans."""
