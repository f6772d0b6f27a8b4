package headway

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// This file reads the RFC 9651 (formerly 8941) structured fields the IETF
// drafts use. Each field line is read in up to three ways, in order:
//
//  1. a strict scanner for the part of RFC 9651 that rate-limit fields use
//     (Items whose bare values are integers, decimals, strings without
//     escapes, tokens, byte sequences or booleans, with parameters). It does
//     not allocate, so a response pays nothing extra for being parsed
//     correctly. FuzzStructuredFields checks that it agrees with httpsfv on
//     every input both accept, and rejects what httpsfv rejects;
//  2. github.com/dunglas/httpsfv, the complete parser, for lines that use
//     anything else (inner lists, escapes, dates, display strings);
//  3. a lenient scanner for lines neither accepts, which reads what deployed
//     servers send instead: spaces before ";" and around "=", upper-case
//     parameter names, unquoted names, a trailing comma.
//
// Only what rate-limit fields use is kept: a member's bare value and the
// parameters q, qu, w, pk, r, t and name.

// sfKind is the type of a structured-field value, as far as we care.
type sfKind uint8

const (
	sfAbsent sfKind = iota
	sfNumber        // integer or decimal
	sfString        // string or token
	sfBytes         // byte sequence, decoded into str
	sfBool
)

type sfValue struct {
	kind sfKind
	b    bool
	num  float64
	str  string
}

// The parameters kept, by index in sfItem.params: the draft's q (quota), qu
// (quota unit), w (window), pk (partition key), r (remaining), t (time to
// reset), and Envoy's name.
const (
	pQ = iota
	pQU
	pW
	pPK
	pR
	pT
	pName
	numSFParams
)

// sfParamIndex returns the index of a kept parameter, or -1. "window" is
// read as w: early drafts (and servers that followed them, such as WHOOP's)
// spelled it out.
func sfParamIndex(key string) int {
	switch key {
	case "q":
		return pQ
	case "qu":
		return pQU
	case "w", "window":
		return pW
	case "pk":
		return pPK
	case "r":
		return pR
	case "t":
		return pT
	case "name":
		return pName
	}
	return -1
}

// sfItem is a list member (or, for dictionaries, a member's value) with the
// parameters we keep.
type sfItem struct {
	key    string // dictionary members only
	val    sfValue
	params [numSFParams]sfValue
}

// param returns a kept parameter, by its index (pQ, pQU, ...).
func (it *sfItem) param(i int) (sfValue, bool) {
	v := it.params[i]
	return v, v.kind != sfAbsent
}

func (it *sfItem) setParam(key string, v sfValue) {
	if i := sfParamIndex(key); i >= 0 {
		it.params[i] = v // a repeated key overwrites, as RFC 9651 says
	}
}

// sfReader reads the members of a List or Dictionary field, one field line
// at a time so that a malformed line does not hide the others:
//
//	r := sfReader{lines: h["Ratelimit"]}
//	var it sfItem
//	for r.next(&it) { ... }
//
// The item is the caller's, so that the common case allocates nothing.
type sfReader struct {
	lines  []string
	dict   bool // Dictionary members: item.key is set
	buf    [sfReadAhead]sfItem
	nbuf   int       // members of the current line read ahead into buf
	ibuf   int       // the next of them to give out
	sc     sfScanner // reads the rest of a long line, once validated
	strict bool      // sc is reading a line it validated
	more   bool      // sc has another member
	fb     []sfItem  // the current line as httpsfv or the lenient scanner read it
}

// sfReadAhead is how many members of a line are read before any is given
// out: a line of at most that many members is scanned once; a longer one is
// validated to its end before the rest is read.
const sfReadAhead = 4

// next reads the next member into it; false at the end.
func (r *sfReader) next(it *sfItem) bool {
	for {
		if r.ibuf < r.nbuf {
			*it = r.buf[r.ibuf]
			r.ibuf++
			return true
		}
		if r.strict && r.more {
			r.sc.member(it) //nolint:errcheck // the line was validated
			r.more, _ = r.sc.afterMember()
			return true
		}
		r.strict = false
		if len(r.fb) > 0 {
			*it, r.fb = r.fb[0], r.fb[1:]
			return true
		}
		if len(r.lines) == 0 {
			return false
		}
		line := r.lines[0]
		r.lines = r.lines[1:]
		switch err := r.readAhead(line); {
		case err == nil:
		case errors.Is(err, errSFUnsupported):
			if r.fb = httpsfvItems(line, r.dict); r.fb == nil {
				r.fb = lenientItems(line, r.dict)
			}
		default:
			r.fb = lenientItems(line, r.dict)
		}
	}
}

// readAhead scans the first members of a line into buf and, if there are
// more, validates the rest so that nothing of an invalid line is given out.
func (r *sfReader) readAhead(line string) error {
	r.nbuf, r.ibuf = 0, 0
	sc := sfScanner{s: line, dict: r.dict}
	sc.skipSP()
	more := sc.i < len(line)
	n := 0
	for more && n < len(r.buf) {
		if err := sc.member(&r.buf[n]); err != nil {
			return err
		}
		n++
		var err error
		if more, err = sc.afterMember(); err != nil {
			return err
		}
	}
	if more {
		rest := sc
		if err := rest.validateMembers(); err != nil {
			return err
		}
		r.sc, r.strict, r.more = sc, true, true
	}
	r.nbuf = n
	return nil
}

var (
	errSFUnsupported = errors.New("structured field uses syntax the fast scanner leaves to httpsfv")
	errSFInvalid     = errors.New("invalid structured field")
)

// sfScanner is the strict scanner of step 1.
type sfScanner struct {
	s    string
	i    int
	dict bool
}

// validate reads the whole line and reports whether it is valid.
func (p *sfScanner) validate() error {
	p.skipSP()
	if p.i == len(p.s) {
		return nil // an empty field line: no members
	}
	return p.validateMembers()
}

// validateMembers reads members to the end of the line.
func (p *sfScanner) validateMembers() error {
	for {
		var it sfItem
		if err := p.member(&it); err != nil {
			return err
		}
		more, err := p.afterMember()
		if err != nil || !more {
			return err
		}
	}
}

// member reads one member and its parameters.
func (p *sfScanner) member(it *sfItem) error {
	*it = sfItem{}
	if p.dict {
		key, err := p.key()
		if err != nil {
			return err
		}
		it.key = key
		if p.i == len(p.s) || p.s[p.i] != '=' {
			it.val = sfValue{kind: sfBool, b: true}
			return p.params(it)
		}
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '(' {
		return errSFUnsupported // an inner list
	}
	var err error
	if it.val, err = p.bare(); err != nil {
		return err
	}
	return p.params(it)
}

// afterMember reads the separator after a member: more is false at the end
// of the line.
func (p *sfScanner) afterMember() (more bool, err error) {
	p.skipOWS()
	if p.i == len(p.s) {
		return false, nil
	}
	if p.s[p.i] != ',' {
		return false, errSFInvalid
	}
	p.i++
	p.skipOWS()
	if p.i == len(p.s) {
		return false, errSFInvalid // a trailing comma
	}
	return true, nil
}

func (p *sfScanner) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfScanner) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *sfScanner) params(it *sfItem) error {
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return err
		}
		v := sfValue{kind: sfBool, b: true}
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			if v, err = p.bare(); err != nil {
				return err
			}
		}
		it.setParam(key, v)
	}
	return nil
}

func (p *sfScanner) key() (string, error) {
	start := p.i
	if p.i == len(p.s) || !(p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] == '*') {
		return "", errSFInvalid
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*' {
			p.i++
			continue
		}
		break
	}
	return p.s[start:p.i], nil
}

// bare reads a bare item.
func (p *sfScanner) bare() (sfValue, error) {
	if p.i == len(p.s) {
		return sfValue{}, errSFInvalid
	}
	switch c := p.s[p.i]; {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.str()
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		start := p.i
		p.i++
		for p.i < len(p.s) && isTokenChar(p.s[p.i]) {
			p.i++
		}
		return sfValue{kind: sfString, str: p.s[start:p.i]}, nil
	case c == ':':
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return sfValue{}, errSFInvalid
		}
		enc := p.s[p.i+1 : p.i+1+end]
		p.i += end + 2
		for j := 0; j < len(enc); j++ {
			if c := enc[j]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
				return sfValue{}, errSFInvalid
			}
		}
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			// httpsfv accepts some padding variants; leave those to it.
			return sfValue{}, errSFUnsupported
		}
		return sfValue{kind: sfBytes, str: string(b)}, nil
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return sfValue{kind: sfBool, b: p.s[p.i-1] == '1'}, nil
		}
		return sfValue{}, errSFInvalid
	case c == '@' || c == '%':
		return sfValue{}, errSFUnsupported // dates and display strings
	}
	return sfValue{}, errSFInvalid
}

// isTokenChar reports whether c may follow the first character of a token:
// tchar, ":" or "/".
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~:/", c) >= 0
}

// number reads an integer (at most 15 digits) or a decimal (at most 12
// digits, a dot, 1 to 3 digits), as RFC 9651 section 4.2.4 says.
func (p *sfScanner) number() (sfValue, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= '0' && c <= '9' {
			digits++
			p.i++
			continue
		}
		if c == '.' && dot < 0 && digits > 0 {
			if digits > 12 {
				return sfValue{}, errSFInvalid
			}
			dot = digits
			p.i++
			continue
		}
		break
	}
	switch {
	case digits == 0:
		return sfValue{}, errSFInvalid
	case dot < 0 && digits > 15:
		return sfValue{}, errSFInvalid
	case dot >= 0 && (digits == dot || digits-dot > 3):
		return sfValue{}, errSFInvalid
	}
	if dot < 0 { // an integer of at most 15 digits: exact in a float64
		n := int64(0)
		for j := start; j < p.i; j++ {
			if c := p.s[j]; c != '-' {
				n = n*10 + int64(c-'0')
			}
		}
		if p.s[start] == '-' {
			n = -n
		}
		return sfValue{kind: sfNumber, num: float64(n)}, nil
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		return sfValue{}, errSFInvalid
	}
	return sfValue{kind: sfNumber, num: f}, nil
}

// str reads a quoted string without escapes; one with escapes is left to
// httpsfv, which unescapes it.
func (p *sfScanner) str() (sfValue, error) {
	p.i++ // the opening quote
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return sfValue{kind: sfString, str: p.s[start : p.i-1]}, nil
		case c == '\\':
			return sfValue{}, errSFUnsupported
		case c < 0x20 || c > 0x7e:
			return sfValue{}, errSFInvalid
		}
		p.i++
	}
	return sfValue{}, errSFInvalid // no closing quote
}

// httpsfvItems reads a line with httpsfv (step 2); nil if it rejects it.
func httpsfvItems(line string, dict bool) []sfItem {
	out := []sfItem{}
	if dict {
		d, err := httpsfv.UnmarshalDictionary([]string{line})
		if err != nil {
			return nil
		}
		for _, k := range d.Names() {
			m, _ := d.Get(k)
			if it, ok := m.(httpsfv.Item); ok {
				item := sfItemOf(it)
				item.key = k
				out = append(out, item)
			}
		}
		return out
	}
	l, err := httpsfv.UnmarshalList([]string{line})
	if err != nil {
		return nil
	}
	for _, m := range l {
		if it, ok := m.(httpsfv.Item); ok { // inner lists: no rate-limit field uses one
			out = append(out, sfItemOf(it))
		}
	}
	return out
}

func sfItemOf(it httpsfv.Item) sfItem {
	item := sfItem{val: sfValueOf(it.Value)}
	if it.Params != nil {
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			item.setParam(k, sfValueOf(v))
		}
	}
	return item
}

func sfValueOf(v any) sfValue {
	switch v := v.(type) {
	case int64:
		return sfValue{kind: sfNumber, num: float64(v)}
	case float64:
		return sfValue{kind: sfNumber, num: v}
	case string:
		return sfValue{kind: sfString, str: v}
	case httpsfv.Token:
		return sfValue{kind: sfString, str: string(v)}
	case []byte:
		return sfValue{kind: sfBytes, str: string(v)}
	case bool:
		return sfValue{kind: sfBool, b: v}
	}
	return sfValue{} // dates and display strings: not used by rate-limit fields
}

// lenientItems reads a line the way deployed servers write it, even when
// that is not RFC 9651 (step 3).
func lenientItems(line string, dict bool) []sfItem {
	var out []sfItem
	for _, member := range splitUnquoted(line, ',') {
		parts := splitUnquoted(member, ';')
		var item sfItem
		if dict {
			k, v, ok := strings.Cut(parts[0], "=")
			item.key = strings.ToLower(strings.TrimSpace(k))
			if item.key == "" {
				continue
			}
			item.val = sfValue{kind: sfBool, b: true}
			if ok {
				item.val = lenientValue(v)
			}
		} else {
			item.val = lenientValue(parts[0])
		}
		params := 0
		for _, p := range parts[1:] {
			k, v, hasValue := strings.Cut(p, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "" {
				continue
			}
			if !hasValue && k[0] == '"' && !dict {
				// A second quoted string: Hugging Face writes the policy's
				// type, then its name ("fixed window";"api";q=500).
				item.val = lenientValue(p)
				continue
			}
			params++
			val := sfValue{kind: sfBool, b: true}
			if hasValue {
				val = lenientValue(v)
			}
			item.setParam(k, val)
		}
		if !dict && item.val.kind == sfAbsent && params == 0 {
			continue // an empty member, as a trailing comma leaves
		}
		out = append(out, item)
	}
	return out
}

// splitUnquoted splits s at each sep that is not inside a quoted string.
func splitUnquoted(s string, sep byte) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// lenientValue reads a bare value: a quoted string, a byte sequence, a
// boolean, a number or a token; anything else is absent.
func lenientValue(s string) sfValue {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return sfValue{}
	case s[0] == '"':
		end := strings.LastIndexByte(s, '"')
		if end <= 0 {
			return sfValue{kind: sfString, str: s[1:]}
		}
		return sfValue{kind: sfString, str: strings.ReplaceAll(s[1:end], `\"`, `"`)}
	case s[0] == ':' && len(s) > 1 && s[len(s)-1] == ':':
		b, err := base64.StdEncoding.DecodeString(s[1 : len(s)-1])
		if err != nil {
			return sfValue{}
		}
		return sfValue{kind: sfBytes, str: string(b)}
	case s == "?1":
		return sfValue{kind: sfBool, b: true}
	case s == "?0":
		return sfValue{kind: sfBool}
	case s[0] == '-' || s[0] >= '0' && s[0] <= '9':
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return sfValue{}
		}
		return sfValue{kind: sfNumber, num: f}
	case s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] == '*':
		for i := 1; i < len(s); i++ {
			if !isTokenChar(s[i]) {
				return sfValue{}
			}
		}
		return sfValue{kind: sfString, str: s}
	}
	return sfValue{}
}
