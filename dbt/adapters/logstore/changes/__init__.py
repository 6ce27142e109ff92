"""Stage 2, the change set: the diff of a commit computed in Spark, the checks a change set
passes before the table commit, and a re-base's retraction of keys the table lost."""
