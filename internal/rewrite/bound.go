package rewrite

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	pg_query "github.com/pganalyze/pg_query_go/v6"
	"github.com/pganalyze/pg_query_go/v6/parser"
)

// MaxBytes is the largest statement text, in bytes, that CheckLimits lets
// through to the parser.
const MaxBytes = 1 << 20

// maxDepth caps the nesting estimate (see CheckLimits) on any stack.
const maxDepth = 4000

// bracketWeight is what one level of brackets adds to the nesting
// estimate: a parenthesised subquery is about five tree levels.
const bracketWeight = 4

// ErrLimit is the error class of statements CheckLimits refuses:
// errors.Is(err, ErrLimit) holds for every *LimitError.
var ErrLimit = errors.New("statement not parsed")

// LimitError says why a statement was not handed to the parser.
type LimitError struct {
	// Offset is the byte offset in the text where the limit was
	// exceeded (the text's length for a size limit).
	Offset int
	// TooLarge is true for the size limit, TooManyTokens for the work
	// limit (CheckWork), both false for the nesting one.
	TooLarge, TooManyTokens bool
	// Value and Limit are the size in bytes, the token count or the
	// nesting estimate, and the limit it exceeded.
	Value, Limit int
}

// SyntaxError is PostgreSQL's parser rejecting a text: Message as the
// server words it (`syntax error at or near "x"`) and Offset, the byte
// offset in the text it points at (-1 when it gives none).
type SyntaxError struct {
	Message string
	Offset  int
}

func (e *SyntaxError) Error() string { return e.Message }

// syntaxError turns pg_query's parse error into a SyntaxError: its
// Cursorpos counts characters from 1, as PostgreSQL's error position does.
func syntaxError(sql string, err error) error {
	var pe *parser.Error
	if !errors.As(err, &pe) {
		return err
	}
	off := -1
	if pe.Cursorpos > 0 {
		off = min(charOffset(sql, pe.Cursorpos), len(sql))
	}
	return &SyntaxError{Message: pe.Message, Offset: off}
}

func (e *LimitError) Error() string {
	if e.TooLarge {
		return fmt.Sprintf("statement not parsed: too large (%d bytes, limit %d)", e.Value, e.Limit)
	}
	if e.TooManyTokens {
		return fmt.Sprintf("statement not parsed: too much work (%d tokens, limit %d)", e.Value, e.Limit)
	}
	return fmt.Sprintf("statement not parsed: too deep (nesting estimate over %d at byte offset %d)", e.Limit, e.Offset)
}

func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// depthLimit is the nesting estimate allowed on this process's stacks:
// the C parser (libpg_query) recurses over the parse tree without a
// depth check when it converts, fingerprints and frees it, using about
// 360 bytes of the calling thread's stack per level of a left-nested
// expression (measured: 8 MiB threads crashed at 23,000 levels of
// "1+1+...", 1 MiB threads before 3,000). Cgo calls run on threads
// whose stack is RLIMIT_STACK (glibc's default thread stack; 2 MiB when
// unlimited): the estimate may use one unit per KiB, at most maxDepth.
var depthLimit = sync.OnceValue(func() int {
	stack := uint64(2 << 20)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_STACK, &rl); err == nil && rl.Cur != ^uint64(0) && rl.Cur > 0 {
		stack = rl.Cur
	}
	return int(min(uint64(maxDepth), stack>>10))
})

// CheckLimits decides, with PostgreSQL's scanner alone (flat, no
// recursion), whether sql may be given to the parser (pg_query.Parse,
// Fingerprint), whose C code would otherwise overflow its thread's
// stack on a deeply nested tree and kill the process: it returns nil, a
// *LimitError (errors.Is ErrLimit) for a text over MaxBytes or whose
// nesting estimate exceeds the limit of this process's stack. A text the
// scanner rejects is let through: the parser stops at the same token
// with the same error, before anything recursive runs.
//
// The nesting estimate is an upper bound of the parse tree's depth: at
// every token, the sum over the open brackets ((, [, CASE ... END) of
// bracketWeight, plus the JOIN and set operation (UNION, INTERSECT,
// EXCEPT) keywords seen at that level (their chains nest to the left),
// plus the tokens other than names and constants since the level's last
// comma, AND or OR (left-associative operators nest one level per
// operator; AND and OR chains are flattened by the grammar and bind
// looser than every other operator). Lists (IN lists, VALUES, target
// lists) do not nest. The limit is min(4000, stack KiB): ordinary
// statements stay far below it (a 20,000-element IN list or 2,000 OR
// arms estimate under 10), and a statement over it would fail anyway
// in pg_query_go, whose protobuf decoding stops at 10,000 levels.
func CheckLimits(sql string) error {
	_, err := checkLimits(sql, 0)
	return err
}

// CheckWork is CheckLimits with a bound on the parser's work as well:
// a text within the size and nesting limits but of more than maxTokens
// tokens (comments included; 0: no bound) is a *LimitError with
// TooManyTokens. Parsing and walking a statement
// costs about 5-7 µs of CPU per token here (a 570 KB text of 30,000
// "1 IN (SELECT 1)" OR arms, 210,000 tokens: 1.4 s in the proxy, the
// server's own parse a fifth of that), so a caller that parses texts it
// does not choose (the proxy: every distinct text once) bounds the
// tokens; the scan that counts them costs about a tenth of the parse.
func CheckWork(sql string, maxTokens int) error {
	_, err := checkLimits(sql, maxTokens)
	return err
}

// Checked is a text that passed CheckWork, with the tokens its scan
// produced: given to Rewrite (Options.Checked) for the same text and
// token bound, Rewrite does not scan it again (the scan of a short
// statement costs 70-150 µs of a first decision in the proxy).
type Checked struct {
	sql       string
	maxTokens int
	tokens    []*pg_query.ScanToken
}

// Check is CheckWork returning the scan for Options.Checked; the error
// is CheckWork's.
func Check(sql string, maxTokens int) (*Checked, error) {
	toks, err := checkLimits(sql, maxTokens)
	if err != nil {
		return nil, err
	}
	return &Checked{sql: sql, maxTokens: maxTokens, tokens: toks}, nil
}

// CheckSize is CheckLimits' size check alone, for a text of n bytes: a
// caller holding the text as bytes (the proxy, a message it relays) so
// learns that the parser will never see it without copying it into a
// string first.
func CheckSize(n int) error {
	if n > MaxBytes {
		return &LimitError{Offset: n, TooLarge: true, Value: n, Limit: MaxBytes}
	}
	return nil
}

// checkLimits is CheckWork, returning the tokens it scanned.
func checkLimits(sql string, maxTokens int) ([]*pg_query.ScanToken, error) {
	if err := CheckSize(len(sql)); err != nil {
		return nil, err
	}
	sc, err := pg_query.Scan(sql)
	if err != nil {
		// The parser stops at the same token with the same error,
		// before anything recursive runs.
		return nil, nil
	}
	if err := checkDepth(sc.Tokens, depthLimit()); err != nil {
		return nil, err
	}
	if maxTokens > 0 && len(sc.Tokens) > maxTokens {
		return nil, &LimitError{Offset: int(sc.Tokens[maxTokens].Start), TooManyTokens: true, Value: len(sc.Tokens), Limit: maxTokens}
	}
	return sc.Tokens, nil
}

// checkDepth is CheckLimits' nesting estimate over scanned tokens.
func checkDepth(toks []*pg_query.ScanToken, limit int) error {
	type level struct{ long, chain int }
	stack := []level{{}}
	outer := 0 // the estimate of the levels below the top one
	for _, t := range toks {
		top := &stack[len(stack)-1]
		switch t.Token {
		case pg_query.Token_SQL_COMMENT, pg_query.Token_C_COMMENT,
			pg_query.Token_IDENT, pg_query.Token_UIDENT, pg_query.Token_SCONST, pg_query.Token_USCONST,
			pg_query.Token_ICONST, pg_query.Token_FCONST, pg_query.Token_BCONST, pg_query.Token_XCONST,
			pg_query.Token_PARAM:
			continue
		case pg_query.Token_ASCII_44, pg_query.Token_AND, pg_query.Token_OR:
			top.chain = 0
			continue
		case pg_query.Token_ASCII_59:
			stack, outer = stack[:1], 0
			stack[0] = level{}
			continue
		case pg_query.Token_ASCII_40, pg_query.Token_ASCII_91, pg_query.Token_CASE:
			top.chain++
			outer += bracketWeight + top.long + top.chain
			stack = append(stack, level{})
		case pg_query.Token_ASCII_41, pg_query.Token_ASCII_93, pg_query.Token_END_P:
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
				top = &stack[len(stack)-1]
				outer -= bracketWeight + top.long + top.chain
			}
			continue
		case pg_query.Token_JOIN, pg_query.Token_UNION, pg_query.Token_INTERSECT, pg_query.Token_EXCEPT:
			top.long++
		default:
			top.chain++
		}
		top = &stack[len(stack)-1]
		if d := outer + top.long + top.chain; d > limit {
			return &LimitError{Offset: int(t.Start), Value: d, Limit: limit}
		}
	}
	return nil
}

// Parse is pg_query.Parse after CheckLimits: the parse tree of sql, a
// *LimitError for a statement the parser must not see, or the parser's
// error.
func Parse(sql string) (*pg_query.ParseResult, error) {
	if err := CheckLimits(sql); err != nil {
		return nil, err
	}
	return pg_query.Parse(sql)
}
