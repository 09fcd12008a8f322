package proxy

// wordStream is scanWords, and mutators.calledIn, over a statement text
// that arrives in pieces (a Query or Parse relayed as it arrives, see
// session.streamClient): fed the pieces in order, then ended, it gives
// what scanWords and calledIn give for the whole text, whatever the
// pieces, keeping only what a word or a look-ahead in progress needs
// (63 bytes of a word: has looks at no more).
type wordStream struct {
	w       words
	or, sub bool
	// mutator: a call of a function of the list mutators returns
	// (asked once, at the first call found).
	mutator  bool
	mutators func() *mutators
	m        *mutators
	asked    bool

	start, lineComment bool // as in scanWords
	prev               byte // the previous byte outside words, 0 when none

	// The word in progress (inWord): its first bytes, its length and
	// start when it began.
	inWord    bool
	word      [63]byte
	wordLen   int
	wordStart bool

	// callAfter's look-ahead after a word: callNone, or callNext (the
	// byte right after the word) or callSpace (after its closing double
	// quote or white space); callWord is that word.
	call     int8
	callWord [63]byte
	callLen  int

	// subqueryAfter's look-ahead after IN, ANY or SOME: subNone, or
	// subSpace (white space and parentheses, parens of them), subComment
	// (after a '/' or '-': a comment if the next byte is sub's), subWord
	// (the first word in the parentheses, of subLen bytes).
	subState int8
	parens   int
	subFirst byte
	subBuf   [6]byte
	subLen   int
}

const (
	callNone = iota
	callNext
	callSpace
)

const (
	subNone = iota
	subSpace
	subComment
	subWord
)

// newWordStream is a scan of a new text; mutators gives the list of
// functions whose call may change the schema (see calledIn).
func newWordStream(mutators func() *mutators) *wordStream {
	return &wordStream{start: true, mutators: mutators}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// feed scans the next piece of the text.
func (ws *wordStream) feed(b []byte) {
	for _, c := range b {
		if ws.inWord {
			if isIdentChar(c) {
				if ws.wordLen < len(ws.word) {
					ws.word[ws.wordLen] = c
				}
				ws.wordLen++
				ws.lookSub(c)
				continue
			}
			ws.endWord()
		}
		ws.lookCall(c)
		ws.lookSub(c)
		if !isIdentStart(c) {
			p := ws.prev
			switch {
			case p == '-' && c == '-':
				ws.start, ws.lineComment = true, true
			case (p == '/' && c == '*') || (p == '*' && c == '/'):
				ws.start = true
			}
			switch {
			case c == ';':
				ws.start = true
			case c == '\n' && ws.lineComment:
				ws.start, ws.lineComment = true, false
			}
			ws.prev = c
			continue
		}
		ws.prev = 0
		ws.inWord, ws.wordStart = true, ws.start
		ws.word[0], ws.wordLen = c, 1
	}
}

// endWord classifies the word that just ended (as scanWords does) and
// starts the look-aheads that follow a word.
func (ws *wordStream) endWord() {
	ws.inWord = false
	v := ws.word[:min(ws.wordLen, len(ws.word))]
	kind := wordOther
	if ws.wordLen <= len(ws.word) {
		kind = wordKind(v, ws.wordStart)
	}
	switch kind {
	case wordContext:
		ws.w.context = true
	case wordOr:
		ws.or = true
	case wordSubquery:
		if !ws.sub {
			ws.subState, ws.parens = subSpace, 0
		}
	}
	ws.call = callNext
	ws.callLen = copy(ws.callWord[:], v)
	ws.start = false
}

// lookCall takes byte c in callAfter's look-ahead.
func (ws *wordStream) lookCall(c byte) {
	switch {
	case ws.call == callNone:
	case c == '(':
		ws.call = callNone
		ws.called(ws.callWord[:ws.callLen])
	case isSpace(c) || (c == '"' && ws.call == callNext):
		ws.call = callSpace
	default:
		ws.call = callNone
	}
}

// called records a word followed by an opening parenthesis.
func (ws *wordStream) called(word []byte) {
	ws.w.calls = true
	if ws.mutator {
		return
	}
	if !ws.asked {
		ws.asked = true
		if ws.mutators != nil {
			ws.m = ws.mutators()
		}
	}
	ws.mutator = has(ws.m, word)
}

// lookSub takes byte c in subqueryAfter's look-ahead.
func (ws *wordStream) lookSub(c byte) {
	switch ws.subState {
	case subSpace:
		switch {
		case isSpace(c):
		case c == '(':
			ws.parens++
		case c == '/' || c == '-':
			ws.subState, ws.subFirst = subComment, c
		case ws.parens == 0 || !isIdentStart(c):
			ws.subState = subNone
		default:
			ws.subState = subWord
			ws.subBuf[0], ws.subLen = c, 1
		}
	case subComment:
		ws.subState = subNone
		ws.sub = (ws.subFirst == '/' && c == '*') || (ws.subFirst == '-' && c == '-')
	case subWord:
		if isIdentChar(c) {
			if ws.subLen < len(ws.subBuf) {
				ws.subBuf[ws.subLen] = c
			}
			ws.subLen++
			return
		}
		ws.endSubWord()
	}
}

// endSubWord decides the subquery look-ahead by its word.
func (ws *wordStream) endSubWord() {
	ws.subState = subNone
	ws.sub = ws.subLen <= len(ws.subBuf) && subqueryWord(ws.subBuf[:ws.subLen])
}

// end ends the text and returns what scanWords would, and whether it
// calls a function of the mutators list (calledIn).
func (ws *wordStream) end() (words, bool) {
	if ws.inWord {
		ws.endWord()
	}
	// Look-aheads at the end of the text: no call, and no subquery
	// unless its word ends with the text.
	ws.call = callNone
	if ws.subState == subWord {
		ws.endSubWord()
	}
	ws.subState = subNone
	ws.w.match = ws.or && ws.sub
	return ws.w, ws.mutator
}
