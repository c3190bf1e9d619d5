"""The sweep: its course (`course.COURSE`), the answers after its cells (`after`), and
`--between`'s matrix of two lock files (`between`)."""
