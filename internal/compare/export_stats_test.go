package compare

// Test access to the statistics of rows.
var (
	WelchDiff   = welchDiff
	BlockLength = blockLength
	Decide      = func(c *Comparison, o Options) { o, _ = o.norm(); decide(c, o) }
)
