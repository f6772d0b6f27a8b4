package headway

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/dunglas/httpsfv"
)

// This file reads the RFC 9651 (formerly 8941) structured fields the IETF
// drafts use. The strict parse is github.com/dunglas/httpsfv; a field line it
// rejects is read again by a lenient scanner that accepts what deployed
// servers send instead: spaces around ";" and "=", upper-case parameter
// names, unquoted names, a trailing comma. Only the parts rate-limit fields
// use are kept: a bare value (a name or a number) and parameters.

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
	num  float64
	str  string
	b    bool
}

type sfParam struct {
	key string // lower case
	val sfValue
}

type sfItem struct {
	val    sfValue
	params []sfParam
}

// param returns the value of the parameter named key (lower case).
func (it *sfItem) param(key string) (sfValue, bool) {
	for _, p := range it.params {
		if p.key == key {
			return p.val, true
		}
	}
	return sfValue{}, false
}

// parseSFList reads the lines of a List field, concatenated as RFC 9110
// combines field lines. When the whole is not a valid list, each line is
// read on its own, strictly if it can be and leniently if not, so that one
// malformed line does not hide the others.
func parseSFList(lines []string) []sfItem {
	if l, err := httpsfv.UnmarshalList(lines); err == nil {
		return appendSFList(nil, l)
	}
	var out []sfItem
	for _, line := range lines {
		if l, err := httpsfv.UnmarshalList([]string{line}); err == nil {
			out = appendSFList(out, l)
			continue
		}
		out = appendLenientList(out, line)
	}
	return out
}

func appendSFList(out []sfItem, l httpsfv.List) []sfItem {
	for _, m := range l {
		it, ok := m.(httpsfv.Item)
		if !ok { // an inner list: no rate-limit field uses one
			continue
		}
		item := sfItem{val: sfValueOf(it.Value)}
		if it.Params != nil {
			for _, k := range it.Params.Names() {
				v, _ := it.Params.Get(k)
				item.params = append(item.params, sfParam{key: k, val: sfValueOf(v)})
			}
		}
		out = append(out, item)
	}
	return out
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
	return sfValue{}
}

// parseSFDict reads a Dictionary field (the -07 "limit=100, remaining=50,
// reset=5") into its members' names and values; parameters are dropped.
func parseSFDict(lines []string) []sfParam {
	if d, err := httpsfv.UnmarshalDictionary(lines); err == nil {
		var out []sfParam
		for _, k := range d.Names() {
			m, _ := d.Get(k)
			if it, ok := m.(httpsfv.Item); ok {
				out = append(out, sfParam{key: k, val: sfValueOf(it.Value)})
			}
		}
		return out
	}
	var out []sfParam
	for _, line := range lines {
		for _, member := range splitUnquoted(line, ',') {
			member, _, _ = strings.Cut(member, ";")
			k, v, ok := strings.Cut(member, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if !ok || k == "" {
				continue
			}
			out = append(out, sfParam{key: k, val: lenientValue(v)})
		}
	}
	return out
}

// appendLenientList scans one line of a List field the way deployed servers
// write it, even when that is not quite RFC 9651.
func appendLenientList(out []sfItem, line string) []sfItem {
	for _, member := range splitUnquoted(line, ',') {
		parts := splitUnquoted(member, ';')
		item := sfItem{val: lenientValue(parts[0])}
		for _, p := range parts[1:] {
			k, v, hasValue := strings.Cut(p, "=")
			k = strings.ToLower(strings.TrimSpace(k))
			if k == "" {
				continue
			}
			val := sfValue{kind: sfBool, b: true}
			if hasValue {
				val = lenientValue(v)
			}
			item.params = append(item.params, sfParam{key: k, val: val})
		}
		if item.val.kind == sfAbsent && len(item.params) == 0 {
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
// boolean, a number, or else a token (any other text, trimmed).
func lenientValue(s string) sfValue {
	s = strings.Trim(s, " \t")
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
	}
	return sfValue{kind: sfString, str: s}
}
