package sf

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/dunglas/httpsfv"
	"github.com/stretchr/testify/require"
)

// FuzzStructuredFields checks the fast scanner against httpsfv: a line both
// accept gives the same members; a line the fast scanner calls invalid,
// httpsfv rejects too.
func FuzzStructuredFields(f *testing.F) {
	for _, s := range []string{
		`"burst";q=100;w=60, "daily";q=1000;w=86400`, `"default";r=50;t=30`, `"burst"; r=2; t=2`,
		`limit=100, remaining=50, reset=5`, `10, 10;w=1, 50;w=60`, `"a";pk=:YTRkMjY4NjgwMTdj:;qu="tokens"`,
		`a;q=1.5;w=-3`, `*tok/en:x;name=?1`, `"x" ;q=1`, `1234567890123456`, `1.2345`, `"a\"b"`, `(1 2);q=3`,
		`a=1;b, c=?0`, `d=@1659578233`, `e=%"x"`, `"unterminated`, `a,`, ` x`, "\tx", `x  ,  y`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, line string, dict bool) {
		sc := scanner{s: line, dict: dict}
		err := sc.validate()
		if errors.Is(err, errUnsupported) {
			return
		}
		var ref []Item
		if dict {
			d, derr := httpsfv.UnmarshalDictionary([]string{line})
			if err != nil {
				if derr == nil && d != nil && len(d.Names()) > 0 {
					t.Fatalf("fast scanner rejects %q (%v), httpsfv accepts it", line, err)
				}
				return
			}
			if derr != nil {
				t.Fatalf("fast scanner accepts %q, httpsfv rejects it: %v", line, derr)
			}
			for _, k := range d.Names() {
				m, _ := d.Get(k)
				if it, ok := m.(httpsfv.Item); ok {
					item := itemOf(it)
					item.Key = k
					ref = append(ref, item)
				}
			}
		} else {
			l, lerr := httpsfv.UnmarshalList([]string{line})
			if err != nil {
				if lerr == nil {
					t.Fatalf("fast scanner rejects %q (%v), httpsfv accepts it", line, err)
				}
				return
			}
			if lerr != nil {
				t.Fatalf("fast scanner accepts %q, httpsfv rejects it: %v", line, lerr)
			}
			for _, m := range l {
				if it, ok := m.(httpsfv.Item); ok {
					ref = append(ref, itemOf(it))
				}
			}
		}
		var got []Item
		r := Reader{Lines: []string{line}, Dict: dict}
		var it Item
		for r.Next(&it) {
			got = append(got, it)
		}
		if dict {
			got = lastOfEachKey(got) // a dictionary keeps the last value of a repeated key
		}
		if !reflect.DeepEqual(ref, got) {
			t.Fatalf("%q:\nhttpsfv %+v\nfast    %+v", line, ref, got)
		}
	})
}

// lastOfEachKey keeps the last value of each key at its first position, as
// an ordered map does.
func lastOfEachKey(items []Item) []Item {
	var out []Item
	index := map[string]int{}
	for _, it := range items {
		if i, ok := index[it.Key]; ok {
			out[i] = it
			continue
		}
		index[it.Key] = len(out)
		out = append(out, it)
	}
	return out
}

// TestSFReaderLongLines: a line longer than the read-ahead is validated to
// its end before anything of it is given out, so an error after the first
// members never yields a member twice.
func TestSFReaderLongLines(t *testing.T) {
	read := func(lines ...string) []string {
		var out []string
		r := Reader{Lines: lines}
		var it Item
		for r.Next(&it) {
			q, _ := it.Param(ParamQ)
			out = append(out, fmt.Sprintf("%s=%v", it.Val.Str, q.Num))
		}
		return out
	}
	long := `a;q=1, b;q=2, c;q=3, d;q=4, e;q=5, f;q=6`
	want := []string{"a=1", "b=2", "c=3", "d=4", "e=5", "f=6"}
	require.Equal(t, want, read(long))
	require.Equal(t, want, read(long+` , `+"\t"))                                  // invalid at the end: read leniently, once
	require.Equal(t, append(want, "G=7"), read(long+`, G ;q=7`))                   // the same, with a deviation
	require.Equal(t, append(want, want...), read(long, long))                      // two lines
	require.Equal(t, []string{"a=1", "b=2", "x=0"}, read(`a;q=1, b;q=2`, ``, `x`)) // an empty line has no members
}
