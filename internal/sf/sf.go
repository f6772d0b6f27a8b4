// Package sf reads the RFC 9651 (formerly 8941) structured fields that the
// IETF rate-limit drafts use (RateLimit, RateLimit-Policy), fast and
// leniently. Each field line is read in up to three ways, in order:
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
package sf

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// Kind is the type of a structured-field value, as far as we care.
type Kind uint8

// The kinds of value.
const (
	Absent Kind = iota // no value (a parameter that is not there)
	Number             // integer or decimal
	String             // string or token
	Bytes              // byte sequence, decoded into Str
	Bool               // boolean
)

// Value is a bare item: a member's value or a parameter's.
type Value struct {
	Kind Kind
	B    bool    // a Bool
	Num  float64 // a Number
	Str  string  // a String, or the decoded Bytes
}

// The parameters kept, by index in Item.Params: the draft's q (quota), qu
// (quota unit), w (window), pk (partition key), r (remaining), t (time to
// reset), and Envoy's name.
const (
	ParamQ = iota
	ParamQU
	ParamW
	ParamPK
	ParamR
	ParamT
	ParamName
	numParams
)

// paramIndex returns the index of a kept parameter, or -1. "window" is
// read as w: early drafts (and servers that followed them, such as WHOOP's)
// spelled it out.
func paramIndex(key string) int {
	switch key {
	case "q":
		return ParamQ
	case "qu":
		return ParamQU
	case "w", "window":
		return ParamW
	case "pk":
		return ParamPK
	case "r":
		return ParamR
	case "t":
		return ParamT
	case "name":
		return ParamName
	}
	return -1
}

// Item is a list member (or, for dictionaries, a member's value) with the
// parameters we keep.
type Item struct {
	Key    string // dictionary members only
	Val    Value
	Params [numParams]Value
}

// Param returns a kept parameter, by its index (ParamQ, ParamQU, ...).
func (it *Item) Param(i int) (Value, bool) {
	v := it.Params[i]
	return v, v.Kind != Absent
}

func (it *Item) setParam(key string, v Value) {
	if i := paramIndex(key); i >= 0 {
		it.Params[i] = v // a repeated key overwrites, as RFC 9651 says
	}
}

// Reader reads the members of a List or Dictionary field, one field line
// at a time so that a malformed line does not hide the others:
//
//	r := Reader{Lines: h["Ratelimit"]}
//	var it Item
//	for r.Next(&it) { ... }
//
// The item is the caller's, so that the common case allocates nothing, and
// members are scanned straight into it.
type Reader struct {
	Lines  []string
	Dict   bool    // Dictionary members: item.Key is set
	sc     scanner // reads the rest of a line, once validated
	strict bool    // sc is reading a line it validated
	more   bool    // sc has another member
	fb     []Item  // the current line as httpsfv or the lenient scanner read it
}

// Next reads the next member into it; false at the end.
func (r *Reader) Next(it *Item) bool {
	for {
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
		if len(r.Lines) == 0 {
			return false
		}
		line := r.Lines[0]
		r.Lines = r.Lines[1:]
		switch ok, err := r.first(line, it); {
		case err == nil:
			if ok {
				return true
			}
		case errors.Is(err, errUnsupported):
			if r.fb = httpsfvItems(line, r.Dict); r.fb == nil {
				r.fb = lenientItems(line, r.Dict)
			}
		default:
			r.fb = lenientItems(line, r.Dict)
		}
	}
}

// first scans the first member of a line into it and, if more follow,
// validates the rest, so that nothing of an invalid line is given out (it
// is then read again by httpsfv or leniently). ok is false for a line
// without members.
func (r *Reader) first(line string, it *Item) (ok bool, err error) {
	sc := scanner{s: line, dict: r.Dict}
	sc.skipSP()
	if sc.i == len(line) {
		return false, nil // an empty field line: no members
	}
	if err := sc.member(it); err != nil {
		return false, err
	}
	more, err := sc.afterMember()
	if err != nil {
		return false, err
	}
	if more {
		rest := sc
		if err := rest.validateMembers(); err != nil {
			return false, err
		}
		r.sc, r.strict, r.more = sc, true, true
	}
	return true, nil
}

var (
	errUnsupported = errors.New("structured field uses syntax the fast scanner leaves to httpsfv")
	errInvalid     = errors.New("invalid structured field")
)

// scanner is the strict scanner of step 1.
type scanner struct {
	s    string
	i    int
	dict bool
}

// validate reads the whole line and reports whether it is valid.
func (p *scanner) validate() error {
	p.skipSP()
	if p.i == len(p.s) {
		return nil // an empty field line: no members
	}
	return p.validateMembers()
}

// validateMembers reads members to the end of the line.
func (p *scanner) validateMembers() error {
	for {
		var it Item
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
func (p *scanner) member(it *Item) error {
	*it = Item{}
	if p.dict {
		key, err := p.key()
		if err != nil {
			return err
		}
		it.Key = key
		if p.i == len(p.s) || p.s[p.i] != '=' {
			it.Val = Value{Kind: Bool, B: true}
			return p.params(it)
		}
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '(' {
		return errUnsupported // an inner list
	}
	var err error
	if it.Val, err = p.bare(); err != nil {
		return err
	}
	return p.params(it)
}

// afterMember reads the separator after a member: more is false at the end
// of the line.
func (p *scanner) afterMember() (more bool, err error) {
	p.skipOWS()
	if p.i == len(p.s) {
		return false, nil
	}
	if p.s[p.i] != ',' {
		return false, errInvalid
	}
	p.i++
	p.skipOWS()
	if p.i == len(p.s) {
		return false, errInvalid // a trailing comma
	}
	return true, nil
}

func (p *scanner) skipSP() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *scanner) skipOWS() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *scanner) params(it *Item) error {
	for p.i < len(p.s) && p.s[p.i] == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return err
		}
		v := Value{Kind: Bool, B: true}
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

func (p *scanner) key() (string, error) {
	start := p.i
	if p.i == len(p.s) || !(p.s[p.i] >= 'a' && p.s[p.i] <= 'z' || p.s[p.i] == '*') {
		return "", errInvalid
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
func (p *scanner) bare() (Value, error) {
	if p.i == len(p.s) {
		return Value{}, errInvalid
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
		return Value{Kind: String, Str: p.s[start:p.i]}, nil
	case c == ':':
		end := strings.IndexByte(p.s[p.i+1:], ':')
		if end < 0 {
			return Value{}, errInvalid
		}
		enc := p.s[p.i+1 : p.i+1+end]
		p.i += end + 2
		for j := 0; j < len(enc); j++ {
			if c := enc[j]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
				return Value{}, errInvalid
			}
		}
		b, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			// httpsfv accepts some padding variants; leave those to it.
			return Value{}, errUnsupported
		}
		return Value{Kind: Bytes, Str: string(b)}, nil
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return Value{Kind: Bool, B: p.s[p.i-1] == '1'}, nil
		}
		return Value{}, errInvalid
	case c == '@' || c == '%':
		return Value{}, errUnsupported // dates and display strings
	}
	return Value{}, errInvalid
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
func (p *scanner) number() (Value, error) {
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
				return Value{}, errInvalid
			}
			dot = digits
			p.i++
			continue
		}
		break
	}
	switch {
	case digits == 0:
		return Value{}, errInvalid
	case dot < 0 && digits > 15:
		return Value{}, errInvalid
	case dot >= 0 && (digits == dot || digits-dot > 3):
		return Value{}, errInvalid
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
		return Value{Kind: Number, Num: float64(n)}, nil
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		return Value{}, errInvalid
	}
	return Value{Kind: Number, Num: f}, nil
}

// str reads a quoted string without escapes; one with escapes is left to
// httpsfv, which unescapes it.
func (p *scanner) str() (Value, error) {
	p.i++ // the opening quote
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == '"':
			p.i++
			return Value{Kind: String, Str: p.s[start : p.i-1]}, nil
		case c == '\\':
			return Value{}, errUnsupported
		case c < 0x20 || c > 0x7e:
			return Value{}, errInvalid
		}
		p.i++
	}
	return Value{}, errInvalid // no closing quote
}

// httpsfvItems reads a line with httpsfv (step 2); nil if it rejects it.
func httpsfvItems(line string, dict bool) []Item {
	out := []Item{}
	if dict {
		d, err := httpsfv.UnmarshalDictionary([]string{line})
		if err != nil {
			return nil
		}
		for _, k := range d.Names() {
			m, _ := d.Get(k)
			if it, ok := m.(httpsfv.Item); ok {
				item := itemOf(it)
				item.Key = k
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
			out = append(out, itemOf(it))
		}
	}
	return out
}

func itemOf(it httpsfv.Item) Item {
	item := Item{Val: valueOf(it.Value)}
	if it.Params != nil {
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			item.setParam(k, valueOf(v))
		}
	}
	return item
}

func valueOf(v any) Value {
	switch v := v.(type) {
	case int64:
		return Value{Kind: Number, Num: float64(v)}
	case float64:
		return Value{Kind: Number, Num: v}
	case string:
		return Value{Kind: String, Str: v}
	case httpsfv.Token:
		return Value{Kind: String, Str: string(v)}
	case []byte:
		return Value{Kind: Bytes, Str: string(v)}
	case bool:
		return Value{Kind: Bool, B: v}
	}
	return Value{} // dates and display strings: not used by rate-limit fields
}

// lenientItems reads a line the way deployed servers write it, even when
// that is not RFC 9651 (step 3).
func lenientItems(line string, dict bool) []Item {
	var out []Item
	for _, member := range splitUnquoted(line, ',') {
		parts := splitUnquoted(member, ';')
		var item Item
		if dict {
			k, v, ok := strings.Cut(parts[0], "=")
			item.Key = strings.ToLower(strings.TrimSpace(k))
			if item.Key == "" {
				continue
			}
			item.Val = Value{Kind: Bool, B: true}
			if ok {
				item.Val = lenientValue(v)
			}
		} else {
			item.Val = lenientValue(parts[0])
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
				item.Val = lenientValue(p)
				continue
			}
			params++
			val := Value{Kind: Bool, B: true}
			if hasValue {
				val = lenientValue(v)
			}
			item.setParam(k, val)
		}
		if !dict && item.Val.Kind == Absent && params == 0 {
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
func lenientValue(s string) Value {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Value{}
	case s[0] == '"':
		end := strings.LastIndexByte(s, '"')
		if end <= 0 {
			return Value{Kind: String, Str: s[1:]}
		}
		return Value{Kind: String, Str: strings.ReplaceAll(s[1:end], `\"`, `"`)}
	case s[0] == ':' && len(s) > 1 && s[len(s)-1] == ':':
		b, err := base64.StdEncoding.DecodeString(s[1 : len(s)-1])
		if err != nil {
			return Value{}
		}
		return Value{Kind: Bytes, Str: string(b)}
	case s == "?1":
		return Value{Kind: Bool, B: true}
	case s == "?0":
		return Value{Kind: Bool}
	case s[0] == '-' || s[0] >= '0' && s[0] <= '9':
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return Value{}
		}
		return Value{Kind: Number, Num: f}
	case s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] == '*':
		for i := 1; i < len(s); i++ {
			if !isTokenChar(s[i]) {
				return Value{}
			}
		}
		return Value{Kind: String, Str: s}
	}
	return Value{}
}
