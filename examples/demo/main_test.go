package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDemo runs a short tour (real time, loopback) and checks the report
// and the SVG: every server has a row per client, headway fails nothing,
// and the chart is well-formed XML.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for a few seconds of real time")
	}
	svg := filepath.Join(t.TempDir(), "demo.svg")
	var out, errs bytes.Buffer
	code := run([]string{"-n", "30", "-c", "4", "-limit", "20", "-svg", svg}, &out, &errs)
	require.Equal(t, 0, code, errs.String())
	s := out.String()
	for _, srv := range servers {
		require.Contains(t, s, "== "+srv.name)
	}
	rows := 0
	for _, line := range strings.Split(s, "\n") {
		if f := strings.Fields(line); len(f) == 8 && f[0] == "headway" {
			rows++
			require.Equal(t, "0", f[4], "headway fails nothing: %s", line)
		}
	}
	require.Equal(t, len(servers), rows, "a headway row per server")
	require.Contains(t, s, "admitted per 100 ms")

	f, err := os.Open(svg)
	require.NoError(t, err)
	defer f.Close()
	d := xml.NewDecoder(f)
	elems := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the SVG is well-formed")
		if se, ok := tok.(xml.StartElement); ok {
			elems++
			if elems == 1 {
				require.Equal(t, "svg", se.Name.Local)
			}
		}
	}
	require.Greater(t, elems, 20)
}

func TestBadUsage(t *testing.T) {
	var out, errs bytes.Buffer
	require.Equal(t, 2, run([]string{"-n", "0"}, &out, &errs))
	require.Equal(t, 2, run([]string{"extra"}, &out, &errs))
	require.Equal(t, 2, run([]string{"-nope"}, &out, &errs))
	require.Equal(t, 0, run([]string{"-h"}, &out, &errs))
}
