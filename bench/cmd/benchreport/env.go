package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Env is what the report says about where and how it was measured.
type Env struct {
	Date       time.Time
	GoVersion  string
	OS, Arch   string
	CPU        string
	NumCPU     int
	GOMAXPROCS int
	Headway    string            // commit, when known
	Modules    map[string]string // module path -> version, of the peers
	Count      int
	Benchtime  time.Duration
	Elapsed    time.Duration // of the benchmarks
	SimElapsed time.Duration // of the simulations
}

func readEnv() Env {
	e := Env{
		Date:       time.Now().UTC(),
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPU:        cpuName(),
		NumCPU:     runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Headway:    headwayCommit(),
		Modules:    map[string]string{},
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			e.Modules[m.Path] = m.Version
		}
	}
	return e
}

// cpuName returns the processor's model name, as go test prints it.
func cpuName() string {
	if runtime.GOOS == "linux" {
		if f, err := os.Open("/proc/cpuinfo"); err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				k, v, ok := strings.Cut(sc.Text(), ":")
				if ok && strings.TrimSpace(k) == "model name" {
					return strings.TrimSpace(v)
				}
			}
		}
	}
	if runtime.GOOS == "darwin" {
		if out, err := exec.Command("sysctl", "-n", "machdep.cpu.brand_string").Output(); err == nil {
			return strings.TrimSpace(string(out))
		}
	}
	return "unknown"
}

// benchDir returns the bench module's directory, found from this file's
// path so that the command works from any directory, or "." (when run from
// bench) if that path is not known.
func benchDir() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..")
	}
	return "."
}

// headwayDir returns the directory of the headway being measured: where
// the replace directive (bench's own, ../, or a go.work's) points.
func headwayDir() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/headway-go/headway" && m.Replace != nil && m.Replace.Version == "" {
				if filepath.IsAbs(m.Replace.Path) {
					return m.Replace.Path
				}
				return filepath.Join(benchDir(), m.Replace.Path)
			}
		}
	}
	return filepath.Join(benchDir(), "..")
}

// headwayCommit returns the commit of the headway being measured, with "+dirty"
// when its tree has changes (outside docs, which this command writes), or ""
// when git cannot tell.
func headwayCommit() string {
	out, err := exec.Command("git", "-C", headwayDir(), "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return ""
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "-C", headwayDir(), "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
		c += "+dirty"
	}
	return c
}
