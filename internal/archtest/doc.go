// Package archtest holds no code: its test (arch_test.go) enforces the
// architecture page (docs/architecture.md, "Rules the tests enforce"):
// the layers and which may import which, hostfacts the only reader of /proc
// and /sys, rewrite the only caller of the C parser, no plugin importing
// another. The page's rules block is rendered from the test's tables and
// compared, so the page and the test say the same.
package archtest
