package compare

// Test access to the statistical tests.
var (
	Welch       = welch
	MannWhitney = mannWhitney
	Holm        = holm
)
