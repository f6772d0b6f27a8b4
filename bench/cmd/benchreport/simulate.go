package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/headway-go/headway/bench"
)

// goodputPrefix begins the goodput cases' names.
const goodputPrefix = "Goodput/"

// runSims runs the simulations whose names filter matches (all when it is
// nil), goodputRuns runs of each goodput case, and returns their results.
//
// Each simulation runs in a testing/synctest bubble, which only a test can
// open (synctest.Test takes a *testing.T). So the simulations run in package
// bench's test binary, built here with go test -c and run with -sim.out
// (TestSimulationsReport), which writes their results as JSON; its progress
// goes to stderr.
func runSims(filter *regexp.Regexp, goodputRuns int) (*bench.SimResults, error) {
	dir, err := os.MkdirTemp("", "benchreport")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Dir = benchDir()
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building the simulations: %w", err)
	}
	out := filepath.Join(dir, "sims.json")
	args := []string{"-test.run", "^TestSimulationsReport$", "-test.count", "1", "-test.timeout", "30m",
		"-sim.out", out, "-sim.runs", strconv.Itoa(goodputRuns)}
	if filter != nil {
		args = append(args, "-sim.run", filter.String())
	}
	run := exec.Command(bin, args...)
	run.Dir = benchDir()
	run.Stdout, run.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := run.Run(); err != nil {
		return nil, fmt.Errorf("running the simulations: %w", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return nil, err
	}
	var res bench.SimResults
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("reading the simulations' results: %w", err)
	}
	res.Elapsed = time.Since(start)
	return &res, nil
}

// after formats a duration after the outage's end, or says that it did not
// happen within limit.
func after(d, limit time.Duration) string {
	if d < 0 {
		return fmt.Sprintf("not within %v", limit)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
